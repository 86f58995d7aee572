"""aarch64 kernel suite under qemu-aarch64: every aarch64 map variant == its ref == the x86 ref, byte for byte.

Data-driven from the kernel maps (a variant whose `requires` are aarch64 features is tested the day its
map lists it): for each map, the ref and its aarch64 variants are cross-compiled into one driver
(aarch64_harness.py) and run under qemu on the cheapest CPU model that has the variant's features
(cortex-a53 for armv8-a NEON, `max` for dotprod / i8mm / SVE), on the bench workload inputs of the
map's interface (smallest bench shape + a ragged one, M in ROWS, every ith of nth in NTHS, buffers at
odd offsets with guard bytes). The same driver built natively gives the x86 ref's bytes for the same
inputs: since a contract fixes the arithmetic order, ARM and x86 must agree bit for bit. Every map's
ref is checked the same way (ops without an aarch64 variant run their ref on ARM).
"""

from __future__ import annotations

import subprocess

import pytest
from aarch64_harness import (
    NTHS,
    QEMU_CPUS,
    Call,
    arch_variants,
    build_driver,
    cases,
    first_mismatches,
    qemu_cpu,
    read_maps,
    run_driver,
)

from kernelmap.bench.workload import constraint_failure
from kernelmap.build.driver import compiler
from kernelmap.target import arch_of, target_features

MAPS = read_maps()
VARIANTS = [(mid, v["name"]) for mid, raw in MAPS.items() for v in arch_variants(raw, "aarch64")]
# Batch-phase row wrappers (maps with `calls`): a portable loop over rows, each row one call of the decode
# kernel they name. Their inputs (per-row positions and KV slots) have no bench workload, so on ARM they are
# covered through their callees, which run here; test_batch_row_wrappers_are_covered_by_their_callees keeps
# that true, and tests/kernels/test_batch_rows.py checks each wrapper against per-row decode calls on x86.
WRAPPERS = sorted(mid for mid, raw in MAPS.items() if raw.get("calls"))
REF_MAPS = sorted(set(MAPS) - set(WRAPPERS))
REF_NTHS = (1, 3)


class MapRun:
    """One map run everywhere: outputs[(case, variant, nth, cpu)] -> {port: bytes}; cpu "x86" is native."""

    def __init__(self, map_id: str, toolchain, tmp) -> None:
        self.raw = MAPS[map_id]
        self.cases = cases(self.raw)
        assert self.cases, f"{map_id}: no bench shape of interface {self.raw['interface']} fits the map"
        ref = next(v for v in self.raw["variants"] if v["name"] == "ref")
        arm = [ref, *arch_variants(self.raw, "aarch64")]
        self.skipped: list[str] = []
        self.outputs: dict[tuple[int, str, int, str], dict[str, bytes]] = {}
        # A map whose SIMD variants are within a tolerance of ref (a vector exp, say) has no byte-exact ref to
        # match; its family body makes every SIMD variant byte-identical to the others, so the ARM variants
        # must give the bytes of the host's x86 SIMD variant of highest priority (x86 "simd").
        comparison = (self.raw.get("numerics") or {}).get("comparison", "bit_exact")
        x86 = [ref]
        if comparison != "bit_exact":
            x86.append(max((v for v in self.raw["variants"] if v["name"] != "ref" and arch_of(v["requires"]) != "aarch64"
                            and set(v["requires"]) <= target_features()), key=lambda v: v["priority"]))
        x86_exe = build_driver(self.raw, x86, compiler(), tmp / "x86")
        x86_calls = [Call(i, fn, 1) for fn in range(len(x86)) for i in range(len(self.cases))]
        for call, out in zip(x86_calls, run_driver(x86_exe, self.cases, x86_calls), strict=True):
            self.outputs[(call.case, "ref" if call.fn == 0 else "simd", 1, "x86")] = out
        arm_exe = build_driver(self.raw, arm, toolchain.cc, tmp / "aarch64")
        # the ref runs on every CPU model a variant of the map runs on (the first model if none does)
        self.cpus = sorted({qemu_cpu(v["requires"]) for v in arm[1:]} or {QEMU_CPUS[0][0]},
                           key=[c for c, _ in QEMU_CPUS].index)
        for cpu in self.cpus:
            keys, calls = [], []
            for fn, var in enumerate(arm):
                if var["name"] != "ref" and qemu_cpu(var["requires"]) != cpu:
                    continue
                for i, case in enumerate(self.cases):
                    why = constraint_failure(var.get("constraints", {}) or {}, case.work.dims)
                    if why:
                        self.skipped.append(f"{var['name']} {case.label}: {why}")
                        continue
                    for nth in REF_NTHS if var["name"] == "ref" else NTHS:
                        keys.append((i, var["name"], nth, cpu))
                        calls.append(Call(i, fn, nth))
            for key, out in zip(keys, run_driver(arm_exe, self.cases, calls, qemu=toolchain, cpu=cpu), strict=True):
                self.outputs[key] = out

    def compare(self, variant: str, cpu: str, nths) -> list[str]:
        """Mismatches of `variant` on `cpu` against the aarch64 ref (nth 1, same CPU) and the x86 ref."""
        ports = {p["name"]: p["dtype"] for key in ("inputs", "outputs", "state") for p in self.raw.get(key, []) or []}
        bad = []
        for i, case in enumerate(self.cases):
            x86 = self.outputs[(i, "ref", 1, "x86")]
            arm_ref = self.outputs[(i, "ref", 1, cpu)]
            simd = self.outputs.get((i, "simd", 1, "x86"))
            for nth in nths:
                got = self.outputs.get((i, variant, nth, cpu))
                if got is None:
                    continue
                for name, data in got.items():
                    wants = (("aarch64 ref", arm_ref[name]), ("x86 ref", x86[name]))
                    if simd is not None and variant != "ref":  # within tolerance of ref; bytes of the x86 SIMD
                        wants = (("x86 SIMD variant", simd[name]),)
                    for what, want in wants:
                        if data != want:
                            bad.append(f"{self.raw['id']} [{variant}] on qemu -cpu {cpu} vs {what}: case {case.label} "
                                       f"M={case.rows} nth={nth} port {name}: "
                                       + first_mismatches(want, data, ports.get(name, "")))
        return bad


@pytest.fixture(scope="session")
def map_run(toolchain, tmp_path_factory):
    runs: dict[str, MapRun] = {}

    def get(map_id: str) -> MapRun:
        if map_id not in runs:
            runs[map_id] = MapRun(map_id, toolchain, tmp_path_factory.mktemp(map_id))
        return runs[map_id]

    return get


def test_aarch64_suite_finds_the_neon_and_dotprod_variants_of_the_maps():
    """The variant list comes from the maps; the q32 ggml family's instantiations are on it with their CPUs."""
    for mid in ("linear_q5_0_q8_0_ggml", "linear_q8_0_q8_0_ggml"):
        assert (mid, "neon") in VARIANTS and (mid, "dotprod") in VARIANTS
        by_name = {v["name"]: v for v in MAPS[mid]["variants"]}
        assert qemu_cpu(by_name["neon"]["requires"]) == "cortex-a53"
        assert qemu_cpu(by_name["dotprod"]["requires"]) == "max"
    assert all(v["name"] != "ref" for raw in MAPS.values() for v in arch_variants(raw, "aarch64"))


@pytest.mark.parametrize(("map_id", "variant"), VARIANTS, ids=[f"{m}-{v}" for m, v in VARIANTS])
def test_aarch64_variant_under_qemu_equals_aarch64_ref_and_x86_ref_bytes(map_run, map_id, variant):
    run = map_run(map_id)
    var = next(v for v in run.raw["variants"] if v["name"] == variant)
    cpu = qemu_cpu(var["requires"])
    ran = [k for k in run.outputs if k[1] == variant]
    assert ran, f"{map_id} [{variant}]: no call ran ({run.skipped})"
    assert {k[2] for k in ran} == set(NTHS)
    bad = run.compare(variant, cpu, NTHS)
    assert not bad, "\n".join(bad[:12]) + (f"\n... {len(bad) - 12} more" if len(bad) > 12 else "")


def test_batch_row_wrappers_are_covered_by_their_callees():
    assert WRAPPERS, "no batch row wrapper maps found (the suite's exclusion list would be dead)"
    for mid in WRAPPERS:
        raw = MAPS[mid]
        assert not arch_variants(raw, "aarch64"), f"{mid}: an aarch64 variant needs its own qemu check here"
        missing = [c for c in raw["calls"] if c not in REF_MAPS]
        assert not missing, f"{mid}: callees not checked under qemu: {missing}"


@pytest.mark.parametrize("map_id", REF_MAPS)
def test_aarch64_ref_under_qemu_equals_x86_ref_bytes_for_every_partition(map_run, map_id):
    """Every map's ref (what an op without an aarch64 variant runs on ARM) gives the x86 ref's bytes, on
    every qemu CPU model the map's variants run on, for nth = 1 and 3."""
    run = map_run(map_id)
    bad = []
    for cpu in run.cpus:
        bad += run.compare("ref", cpu, REF_NTHS)
    assert not bad, "\n".join(bad[:12]) + (f"\n... {len(bad) - 12} more" if len(bad) > 12 else "")


def test_start_up_check_hwcap_bits_equal_the_cross_toolchain_headers(toolchain, tmp_path):
    """The generated start-up check tests HWCAP bits as numbers; they must be <asm/hwcap.h>'s values."""
    from kernelmap.codegen.emit import HWCAP_FEATURES

    lines = ["#include <asm/hwcap.h>"]
    for feat, (_word, name, bit) in sorted(HWCAP_FEATURES.items()):
        lines.append(f'_Static_assert({name} == (1UL << {bit}), "{feat}: {name}");')
    src = tmp_path / "hwcap.c"
    src.write_text("\n".join(lines) + "\n")
    proc = subprocess.run([toolchain.cc, "-std=c11", "-fsyntax-only", str(src)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
