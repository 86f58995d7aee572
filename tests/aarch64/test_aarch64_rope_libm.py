"""RoPE's C library calls give the same bits on aarch64 (under qemu) and x86: sinf / cosf of the angles, powf of the
frequency ratio.

The RoPE kernels take cos and sin of pos * theta and theta's ratio powf(freq_base, -2 / D) from the C library, which
the contracts call exact functions; unlike expf (km_expf.h: aarch64 glibc's expf has another last bit at two
inputs), the two C libraries agree here: rope_libm_driver.c hashes sinf and cosf of every float in [0, 2^17) (every
angle of a context up to 131072 positions; the fast test every 61st) and powf for six bases and every even D up to
1024, built natively and for aarch64 (plain armv8-a, run under qemu on cortex-a53), and the hashes must be equal.
Cost: the fast test ~2 s under qemu; the slow one (every float) ~2 min under qemu, 10 s natively.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from kernelmap.build.driver import BASE_CFLAGS, compiler

DRIVER_C = Path(__file__).with_name("rope_libm_driver.c")
ANGLES = (0, 0x48000000)  # the float bit patterns of [0, 2^17)


def _run(cmd: list[str]) -> str:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, f"{' '.join(cmd)}: exit {proc.returncode}: {proc.stderr.strip()[-2000:]}"
    return proc.stdout.strip()


@pytest.fixture(scope="module")
def builds(toolchain, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("rope_libm")
    exes = {}
    for name, cc in (("x86", compiler()), ("arm", toolchain.cc)):
        exes[name] = tmp / f"rope_libm_{name}"
        _run([cc, *BASE_CFLAGS, str(DRIVER_C), "-o", str(exes[name]), "-lm"])
    qemu = [toolchain.qemu, "-L", str(toolchain.sysroot), "-cpu", "cortex-a53"]
    return lambda args: (_run([str(exes["x86"]), *args]), _run([*qemu, str(exes["arm"]), *args]))


def _compare(x86: str, arm: str, what: str) -> None:
    names = ("sinf", "cosf", "powf")
    differ = [n for n, a, b in zip(names, x86.split(), arm.split(), strict=True) if a != b]
    assert not differ, f"aarch64 and x86 C libraries differ on {', '.join(differ)} over {what} (x86 {x86}, arm {arm})"


def test_rope_libm_calls_sampled_give_the_same_bits_on_aarch64_and_x86(builds):
    x86, arm = builds([hex(ANGLES[0]), hex(ANGLES[1]), "61"])
    _compare(x86, arm, "every 61st float of [0, 2^17)")


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("KERNELMAP_SLOW"), reason="slow (every float of [0, 2^17) under qemu, ~2 min): "
                    "set KERNELMAP_SLOW=1 (`make test-slow`); the sampled test is the fast version")
def test_rope_libm_calls_every_angle_give_the_same_bits_on_aarch64_and_x86(builds):
    x86, arm = builds([hex(ANGLES[0]), hex(ANGLES[1]), "1"])
    _compare(x86, arm, "every float of [0, 2^17)")
