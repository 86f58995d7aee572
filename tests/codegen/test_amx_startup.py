"""The generated start-up check for AMX variants: besides the CPU bits it asks Linux for the tile state
(arch_prctl ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) and refuses to run, with one message, if the OS says no.

On a CPU with AMX the check body is compiled into a tiny program that then executes a tile instruction,
which only works once the OS has granted the state (without the grant it dies with SIGILL)."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from kernelmap.codegen.emit import cpu_checks
from kernelmap.target import host_features

AMX = {"amx_tile", "amx_int8", "avx512f"}

PROGRAM = r"""
#include <immintrin.h>
#include <stdio.h>
#include <string.h>
static void km_set_err(char *err, size_t len, const char *msg, const char *x) { (void)x; snprintf(err, len, "%s", msg); }
static int check(char *err, size_t errlen) {
@@CHECKS@@
    return 0;
}
int main(void) {
    char err[256] = "";
    if (check(err, sizeof err)) { puts(err); return 3; }
    unsigned char cfg[64] __attribute__((aligned(64)));
    memset(cfg, 0, sizeof cfg);
    cfg[0] = 1; cfg[16] = 64; cfg[48] = 16; /* palette 1, tile 0: 16 rows x 64 bytes */
    _tile_loadconfig(cfg);
    _tile_zero(0);
    _tile_release();
    puts("tiles ok");
    return 0;
}
"""


def test_start_up_check_for_amx_requests_the_tile_state_and_refuses_by_message():
    text = cpu_checks(AMX)
    assert '__builtin_cpu_supports("amx-int8")' in text and '__builtin_cpu_supports("amx-tile")' in text
    assert "syscall(158 /* SYS_arch_prctl */, 0x1023 /* ARCH_REQ_XCOMP_PERM */" in text
    assert "the OS refused the tile state" in text
    assert "arch_prctl" not in cpu_checks({"avx512f", "avx512_vnni"})


def test_start_up_check_for_amx_lets_tile_instructions_run_on_this_cpu(tmp_path):
    missing = sorted(AMX - host_features())
    if missing:
        pytest.skip(f"this CPU lacks {', '.join(missing)}: the AMX start-up check cannot be run here")
    if shutil.which("gcc") is None:
        pytest.skip("no gcc")
    src = tmp_path / "amx_check.c"
    src.write_text(PROGRAM.replace("@@CHECKS@@", cpu_checks(AMX)))
    exe = tmp_path / "amx_check"
    subprocess.run(["gcc", "-O1", "-mamx-tile", "-mamx-int8", str(src), "-o", str(exe)], check=True)
    run = subprocess.run([str(exe)], capture_output=True, text=True)
    assert run.returncode == 0 and run.stdout.strip() == "tiles ok", (run.returncode, run.stdout, run.stderr)
