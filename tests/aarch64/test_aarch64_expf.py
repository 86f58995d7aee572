"""expf on aarch64 under qemu and on x86: the lanes' kl_fv_expf and the scalar km_expf give x86-64 glibc's expf bits.

km_expf.h's contract: every kernel's expf is x86-64 glibc's expf (its FMA build) bit for bit, on every CPU: the
flash-attention softmax calls the vector kl_fv_expf, the refs and scalar tails the scalar km_expf. expf_driver.c is
built four ways: with the NEON lanes (the plain ggml_fa map's neon cflags, cross-compiled with aarch64-linux-gnu-gcc,
run under qemu-aarch64 on the CPU model the harness gives that variant, cortex-a53) and with the x86 lanes the host
has (the map's avx512 variant when the host can run it, else avx2; kernel_harness.host_can_run, so KERNELMAP_ISA is
honoured), and km_expf with the refs' flags (no ISA flags) for both. Each walks float bit ranges and reports per range
the inputs that differ from that machine's expf and a hash of every result. Per range: x86 results == x86 glibc's
expf; ARM hash == x86 hash (the same bits on every CPU); ARM results == aarch64 glibc's expf except at the two
inputs where aarch64 glibc itself differs from x86's (AARCH64_LIBM_DIFFERS, found by the all-inputs run: aarch64
glibc rounds 32/ln2 * x before subtracting, the x86 FMA build fuses it), where the result must be x86's. A hash
difference is narrowed (both builds rerun on 64 sub-ranges at a time) to the first input whose bits differ, which
the failure names with both results.

Cost (this 2-core machine): `make test` runs EXPF_SAMPLE (tests/support/expf_sample.py: 12.3M inputs, the ranges
the x86 hook test uses, not shrunk) for both functions: ~2.3 s of CPU under qemu each, a few seconds for the module
with the four builds. The slow test (`make test-slow`) runs all 2^32 inputs as 256 slices of 2^24, one qemu process
per core, the x86 build alongside: 13.8 min of CPU for kl_fv_expf (~190 ns per input under qemu, ~12 ns natively),
9.6 min of wall time with the machine near idle; km_expf about as much again.
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
from aarch64_harness import MAPS_DIR, qemu_cpu
from expf_sample import EXPF_SAMPLE
from kernel_harness import host_can_run

from kernelmap.build.driver import BASE_CFLAGS, KERNEL_ROOT, compiler

DRIVER_C = Path(__file__).with_name("expf_driver.c")
FA_MAP = "attention_f16kv_ggmlfa"  # the plain ggml_fa map: its variants' requires and cflags build the lanes
ARM_VARIANT = "neon"
X86_VARIANTS = ("avx512", "avx2")  # the first the host can run
ALL_SLICE = 1 << 24                # the slow test's slices of the 2^32 patterns
ALL_INPUTS = [(lo, ALL_SLICE) for lo in range(0, 1 << 32, ALL_SLICE)]
NARROW = 64                        # sub-ranges per step when narrowing a hash difference to one input
# input bits -> (x86 glibc's expf bits, aarch64 glibc 2.36's): the only inputs where the two C libraries differ
AARCH64_LIBM_DIFFERS = {0x4202422F: (0x56FC9F1C, 0x56FC9F1B), 0xC27C65D9: (0x11FA2993, 0x11FA2992)}
KINDS = ("vector", "scalar")       # kl_fv_expf (the lanes), km_expf (-DKM_EXPF_DRIVER_SCALAR=1, the refs' flags)


@dataclass(frozen=True)
class RangeResult:
    """One output line of expf_driver: a range's mismatch count, its first mismatch, the two hashes."""

    lo: int
    n: int
    bad: int
    first: int      # the first input whose kl_fv_expf bits differ from expf (0 when bad is 0)
    got: int        # kl_fv_expf's bits there
    want: int       # expf's bits there
    hash: int       # FNV-1a of every kl_fv_expf result, in input order
    libm_hash: int  # the same of expf's results


@dataclass(frozen=True)
class Driver:
    """expf_driver.c built for one lanes header; `prefix` is the qemu command line for the aarch64 build."""

    label: str
    exe: Path
    prefix: tuple[str, ...] = ()

    def _run(self, args: list[str], stdin: str, timeout: float) -> str:
        cmd = [*self.prefix, str(self.exe), *args]
        proc = subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=timeout)
        if proc.returncode != 0:
            raise AssertionError(f"{' '.join(cmd)}: exit {proc.returncode}: {proc.stderr.strip()[-2000:]}")
        return proc.stdout

    def ranges(self, ranges: list[tuple[int, int]], timeout: float = 600) -> list[RangeResult]:
        """The driver's line for each range (lo, n), in order (the ranges go on stdin)."""
        out = self._run([], "".join(f"{lo:#x} {n}\n" for lo, n in ranges), timeout)
        got = [RangeResult(*(int(w, 16) if i not in (1, 2) else int(w) for i, w in enumerate(line.split())))
               for line in out.splitlines()]
        assert [(r.lo, r.n) for r in got] == list(ranges), f"{self.label}: output ranges differ from the input's"
        return got

    def values(self, lo: int, n: int) -> list[tuple[int, int, int]]:
        """(input, kl_fv_expf, expf) bits of every input in [lo, lo + n)."""
        return [tuple(int(w, 16) for w in line.split()) for line in self._run(["--values", str(lo), str(n)], "", 600)
                .splitlines()]


def _f(bits: int) -> str:
    return f"{bits:#010x} ({struct.unpack('<f', struct.pack('<I', bits))[0]!r})"


def _build(cc: str, cflags: list[str], out: Path) -> Path:
    cmd = [cc, *BASE_CFLAGS, *cflags, f"-I{KERNEL_ROOT / 'common'}", str(DRIVER_C), "-o", str(out), "-lm"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        raise AssertionError(f"expf_driver.c: compile failed: {' '.join(cmd)}\n{proc.stderr[-3000:]}")
    return out


@dataclass(frozen=True)
class Drivers:
    arm: Driver
    x86: Driver | None
    x86_missing: str   # why there is no x86 build ("" when there is one)


@pytest.fixture(scope="module", params=KINDS)
def drivers(request, toolchain, tmp_path_factory) -> Drivers:
    """The aarch64 build (run under qemu) and the native x86 build: the lanes' kl_fv_expf with the best lanes the
    host can run ("vector"), or km_expf with the refs' flags ("scalar")."""
    kind = request.param
    variants = {v["name"]: v for v in json.loads((MAPS_DIR / f"{FA_MAP}.json").read_text(encoding="utf-8"))["variants"]}
    tmp = tmp_path_factory.mktemp(f"expf_{kind}")
    neon = variants[ARM_VARIANT]
    cpu = qemu_cpu(neon["requires"])
    qemu = (toolchain.qemu, "-L", str(toolchain.sysroot), "-cpu", cpu)
    if kind == "scalar":
        scalar = ["-DKM_EXPF_DRIVER_SCALAR=1"]
        return Drivers(Driver(f"km_expf on qemu-aarch64 -cpu {cpu}", _build(toolchain.cc, scalar, tmp / "arm"), qemu),
                       Driver("km_expf on x86_64", _build(compiler(), scalar, tmp / "x86")), "")
    arm = Driver(f"kl_fv_expf [{ARM_VARIANT}] on qemu-aarch64 -cpu {cpu}",
                 _build(toolchain.cc, neon.get("cflags", []), tmp / "expf_aarch64"), qemu)
    lacks = []
    for name in X86_VARIANTS:
        ok, why = host_can_run(variants[name]["requires"])
        if ok:
            exe = _build(compiler(), variants[name].get("cflags", []), tmp / f"expf_{name}")
            return Drivers(arm, Driver(f"kl_fv_expf [{name}] on x86_64", exe), "")
        lacks.append(f"{name}: {why}")
    return Drivers(arm, None, "no x86 lanes to compare with (" + "; ".join(lacks) + ")")


def _run_all(driver: Driver, ranges: list[tuple[int, int]], jobs: int) -> list[RangeResult]:
    """The ranges split over `jobs` driver processes run at once; results in range order."""
    parts = [ranges[j::jobs] for j in range(jobs)]
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        done = list(pool.map(lambda part: driver.ranges(part, timeout=3 * 3600), parts))
    return sorted((r for part in done for r in part), key=lambda r: r.lo)


def _libm_failures(results: list[RangeResult], driver: Driver, libm: str, other: Driver | None = None) -> list[str]:
    """One line per range with mismatches; with `other` (the other architecture's build), its two results at the
    first mismatch too (which side left the contract: the lanes, or this machine's expf)."""
    bad = []
    for r in (r for r in results if r.bad):
        if libm == "aarch64 glibc" and r.bad == 1 and AARCH64_LIBM_DIFFERS.get(r.first) == (r.got, r.want):
            continue  # aarch64 glibc's own last bit there; the result is x86's (AARCH64_LIBM_DIFFERS)
        line = (f"{driver.label} != {libm} expf for {r.bad} of {r.n} inputs in [{r.lo:#010x}, +{r.n}): first x = "
                f"{_f(r.first)}: got {_f(r.got)}, want {_f(r.want)}")
        if other is not None:
            (_, got, want), = other.values(r.first, 1)
            line += f" (there {other.label} gives {_f(got)}, its expf {_f(want)})"
        bad.append(line)
    return bad


def _first_difference(drivers: Drivers, lo: int, n: int) -> str:
    """The first input of [lo, lo + n) whose kl_fv_expf bits differ between the two builds, with both results."""
    arm, x86 = drivers.arm, drivers.x86
    assert x86 is not None
    while n > NARROW:
        step = -(-n // NARROW)
        subs = [(a, min(step, lo + n - a)) for a in range(lo, lo + n, step)]
        pairs = zip(arm.ranges(subs), x86.ranges(subs), strict=True)
        lo, n = next(((a.lo, a.n) for a, b in pairs if a.hash != b.hash), (lo, 0))
    for (x, got, libm), (_, want, x86_libm) in zip(arm.values(lo, n), x86.values(lo, n), strict=True):
        if got != want:
            return (f"first x = {_f(x)}: aarch64 {_f(got)} (aarch64 expf {_f(libm)}), x86 {_f(want)} "
                    f"(x86 expf {_f(x86_libm)})")
    return "no single input differs on a rerun (nondeterministic output?)"


def _cross_failures(drivers: Drivers, arm: list[RangeResult], x86: list[RangeResult]) -> list[str]:
    bad = []
    for a, b in zip(arm, x86, strict=True):
        if a.hash != b.hash:
            libms = "equal" if a.libm_hash == b.libm_hash else "differ too"
            bad.append(f"{drivers.arm.label} bits != {drivers.x86.label} bits in [{a.lo:#010x}, +{a.n}) (hash "
                       f"{a.hash:016x} vs {b.hash:016x}; the two C libraries' expf hashes {libms}): "
                       + _first_difference(drivers, a.lo, a.n))
    return bad


def _report(bad: list[str]) -> str:
    return "\n".join(bad[:12]) + (f"\n... {len(bad) - 12} more" if len(bad) > 12 else "")


@pytest.fixture(scope="module")
def sampled(drivers) -> tuple[list[RangeResult], list[RangeResult] | None]:
    """Both builds' results on EXPF_SAMPLE (the x86 one None without x86 lanes)."""
    return drivers.arm.ranges(EXPF_SAMPLE), drivers.x86.ranges(EXPF_SAMPLE) if drivers.x86 else None


def test_neon_expf_sampled_equals_aarch64_libm_expf(drivers, sampled):
    bad = _libm_failures(sampled[0], drivers.arm, "aarch64 glibc", drivers.x86)
    assert not bad, _report(bad)


def test_neon_expf_sampled_bits_equal_x86_lanes_bits(drivers, sampled):
    if drivers.x86 is None:
        pytest.skip(drivers.x86_missing)
    bad = _cross_failures(drivers, *sampled)
    assert not bad, _report(bad)


def test_x86_lanes_expf_sampled_equals_x86_libm_expf(drivers, sampled):
    if drivers.x86 is None:
        pytest.skip(drivers.x86_missing)
    bad = _libm_failures(sampled[1], drivers.x86, "x86 glibc", drivers.arm)
    assert not bad, _report(bad)


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("KERNELMAP_SLOW"), reason="slow (all 2^32 floats under qemu, ~10 min on 2 "
                    "cores): set KERNELMAP_SLOW=1 (`make test-slow`); the sampled tests above are the fast version")
def test_neon_expf_all_inputs_equal_aarch64_libm_and_x86_lanes_bits(drivers):
    """Every float: NEON == aarch64 expf, NEON bits == x86 lanes' bits, x86 lanes == x86 expf (one qemu process
    per core, the x86 build alongside)."""
    jobs = max(1, len(os.sched_getaffinity(0)))
    with ThreadPoolExecutor(max_workers=2) as pool:
        arm_job = pool.submit(_run_all, drivers.arm, ALL_INPUTS, jobs)
        x86_job = pool.submit(_run_all, drivers.x86, ALL_INPUTS, 1) if drivers.x86 else None
        arm, x86 = arm_job.result(), x86_job.result() if x86_job else None
    bad = _libm_failures(arm, drivers.arm, "aarch64 glibc", drivers.x86)
    if x86 is not None:
        bad += _cross_failures(drivers, arm, x86) + _libm_failures(x86, drivers.x86, "x86 glibc", drivers.arm)
    assert not bad, _report(bad)
    if x86 is None:
        pytest.skip(f"checked against aarch64 expf only: {drivers.x86_missing}")


def test_expf_where_aarch64_glibc_differs_is_x86_glibc_on_both(drivers):
    """The two inputs where aarch64 glibc's expf has another last bit than x86 glibc's: there the ARM build gives
    x86's bits (the contract), and this test notices if either C library changes its answer."""
    for x, (x86_bits, aarch64_libm) in AARCH64_LIBM_DIFFERS.items():
        (_, got, libm), = drivers.arm.values(x, 1)
        assert (got, libm) == (x86_bits, aarch64_libm), (
            f"{drivers.arm.label} at {_f(x)}: got {_f(got)}, aarch64 expf {_f(libm)}; want {_f(x86_bits)} and "
            f"{_f(aarch64_libm)}")
        if drivers.x86 is not None:
            (_, got, libm), = drivers.x86.values(x, 1)
            assert got == libm == x86_bits, f"{drivers.x86.label} at {_f(x)}: got {_f(got)}, x86 expf {_f(libm)}"
