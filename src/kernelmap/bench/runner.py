"""Bench stage: time every provider variant the target can run, with a C pthread team, against measured bandwidth.

Input: providers (kernel maps), bench shapes, row counts and thread counts. Output: `BenchResult`
rows (median seconds, GB/s, GOP/s, fraction of the machine's streaming-read bandwidth) plus skip and
error records. Kernels are called through generated C trampolines, never through Python per call.
It does not check numerics (tests/kernels does) and does not write files (record.py does).
"""

from __future__ import annotations

import ctypes
import hashlib
import math
import mmap
import re
import statistics
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from kernelmap.bench.providers import BenchProvider, BenchVariant
from kernelmap.bench.workload import Workload, bench_cases, constraint_failure, make_workload, weight_data
from kernelmap.build.driver import KERNEL_ROOT, CompileUnit, build_shared
from kernelmap.errors import BuildError, KernelmapError, RequestError
from kernelmap.target import missing, target_features

__all__ = ["GEMV_FLOOR", "INT8_PEAK_KINDS", "LANE_STEP_KINDS", "LANE_STEP_WEIGHTS", "BenchResult", "BenchReport", "gemv_summary", "int8_peak_kind",
           "llc_bytes", "measure_bandwidth", "measure_int8_peak", "prefill_summary", "rebase_bandwidth", "resolver_variants", "run_bench",
           "time_call", "time_calls"]

HARNESS = Path(__file__).resolve().parent / "harness.c"
_SYMBOL = re.compile(r"^km_[a-z0-9_]+__[a-z0-9_]+$")
_CAST = re.compile(r"^(const )?(void|float|double|int|int8_t|uint8_t|int16_t|uint16_t|int32_t|uint32_t|"
                   r"int64_t|uint64_t|km_half|km_block_[a-z0-9_]+)( ?\*{1,2})?$")
_POINTER_KINDS = ("output", "activation", "weight", "weight_opt", "state", "scratch")
_PARAM_C = {"float": "float", "int64": "int64_t", "int32": "int32_t"}
GEMV_INTERFACE = "linear.token_major.v1"
GEMV_FLOOR = 0.8  # issue 13: a decode GEMV should stream its weights at >= 80% of the measured read bandwidth
# The int8 peak of an ISA variant (issue 16): the instruction its integer dots are built on, by the first
# feature of the variant's `requires` listed here: (feature, harness kind, instruction, int8 products per
# instruction). The peak is measured, not computed from a clock: harness.c's km_bench_peak_call runs
# independent chains of that instruction on every thread of the team.
INT8_PEAK_KINDS = (("avx512_vnni", 3, "vpdpbusd zmm", 64),
                   ("avx512bw", 2, "vpmaddubsw zmm", 64),
                   ("avx2", 1, "vpmaddubsw ymm", 32))
_PEAK_ITERS = 100_000  # iterations of the calibrating loop per call (12 instructions each)
# The lane step of each instruction (harness kinds 4-6): the whole sequence the 32-element formats' contracts
# (LANE_STEP_WEIGHTS: one f32 fma per block and contract lane) need per int8 dot of one lane vector (the dot into
# an exact int32 with its seed, the magic removed, the block's fma), independent steps. It is those contracts'
# floor on the CPU: how fast a GEMM under them can go per product whatever its blocking (on AVX2 the instruction
# peak counts vpmaddubsw alone, while each 32 products also need a vpmaddwd and an fma, which share its ports on
# Zen 3). The K-quant contracts do their float steps once per sub-block scale or superblock, so the lane step
# is no floor for them and is not reported.
LANE_STEP_KINDS = {"vpmaddubsw ymm": 4, "vpmaddubsw zmm": 5, "vpdpbusd zmm": 6}
LANE_STEP_WEIGHTS = frozenset({"q4_0", "q4_1", "q5_0", "q5_1", "q8_0"})


@dataclass
class BenchResult:
    """One timed point: provider variant x shape x rows x threads."""

    provider: str
    variant: str
    interface: str
    shape: str
    rows: int
    threads: int
    median_s: float
    reps: int
    bytes_moved: float
    flops: float | None
    gbps: float
    gops: float | None
    frac_bw: float | None
    gmacs: float | None = None  # int8 linear points: multiply-adds (M * N * K) per second / 1e9
    peak_instr: str | None = None  # the variant's int8 instruction (INT8_PEAK_KINDS)
    frac_peak: float | None = None  # gmacs / the measured peak of that instruction at this thread count
    frac_lane: float | None = None  # gmacs / the measured peak of its lane step (LANE_STEP_KINDS)
    frac_bw_typical: float | None = None  # gbps / the typical (median-pass) read bandwidth, like for like with median_s
    bw_adjacent: float | None = None  # GB/s of the streaming read's median pass right before and after this point
    frac_bw_adjacent: float | None = None  # gbps / bw_adjacent


@dataclass
class BenchReport:
    """Everything one bench run produced."""

    bandwidth: dict[int, float] = field(default_factory=dict)  # threads -> GB/s (the median of the samples)
    bandwidth_samples: dict[int, list[float]] = field(default_factory=dict)  # threads -> every measurement
    # the same measurements' median pass (a typical pass, as each kernel point's median call) instead of the fastest
    bandwidth_typical: dict[int, float] = field(default_factory=dict)
    bandwidth_typical_samples: dict[int, list[float]] = field(default_factory=dict)
    int8_peak: dict[tuple[str, int], float] = field(default_factory=dict)  # (instruction, threads) -> GMAC/s
    lane_peak: dict[tuple[str, int], float] = field(default_factory=dict)  # (instruction, threads) -> GMAC/s
    results: list[BenchResult] = field(default_factory=list)
    skipped: list[dict[str, Any]] = field(default_factory=list)
    errors: list[dict[str, Any]] = field(default_factory=list)


def _harness_unit(features: frozenset[str]) -> CompileUnit:
    flags = ("-pthread", "-mavx2") if "avx2" in features else ("-pthread",)
    return CompileUnit(HARNESS, flags)


def _c_type(entry: dict[str, Any], raw: dict[str, Any]) -> str:
    kind, _, name = entry["source"].partition(":")
    cast = entry.get("cast")
    if cast is not None and not _CAST.match(cast):
        raise RequestError("call_abi cast is not an allowed C type", path=raw.get("id"),
                           pointer="/call_abi/params", value=cast)
    if kind in _POINTER_KINDS:
        return cast or "void *"
    if cast:
        return cast
    if kind == "dim":
        return "int64_t"
    if kind == "runtime":
        return "int" if name in ("ith", "nth") else "int64_t"
    if kind == "param":
        types = {p["name"]: p.get("type", "") for p in raw.get("params", [])}
        return _PARAM_C.get(types.get(name, ""), "float")
    if kind == "const":
        return "double" if "." in name else "int64_t"
    raise RequestError(f"unknown call_abi source kind in {entry['source']!r}", path=raw.get("id"),
                       pointer="/call_abi/params")


def _slot_expr(ctype: str, index: int) -> str:
    if ctype.endswith("*"):
        return f"({ctype})(uintptr_t)s[{index}]"
    if ctype == "float":
        return f"km_bench_f32(s[{index}])"
    if ctype == "double":
        return f"km_bench_f64(s[{index}])"
    return f"({ctype})(int64_t)s[{index}]"


def trampoline_source(raw: dict[str, Any], variants: Sequence[BenchVariant]) -> str:
    """C source with one `km_bench_t<i>(slots, ith, nth)` per variant calling it with its map's ABI."""
    params = raw["call_abi"]["params"]
    types = [_c_type(p, raw) for p in params]
    lines = ["/* Generated by kernelmap bench: call trampolines; do not edit. */",
             "#include <stdint.h>", "#include <string.h>", '#include "km_common.h"',
             "static inline float km_bench_f32(uint64_t v) { uint32_t b = (uint32_t)v; float f; "
             "memcpy(&f, &b, 4); return f; }",
             "static inline double km_bench_f64(uint64_t v) { double d; memcpy(&d, &v, 8); return d; }"]
    for i, var in enumerate(variants):
        if not _SYMBOL.match(var.symbol):
            raise RequestError("variant symbol is not a kernel symbol", path=raw.get("id"),
                               pointer="/variants", value=var.symbol, expected="km_<id>__<variant>")
        proto = ", ".join(types)
        lines.append(f"void {var.symbol}({proto});")
        args = []
        for j, (p, t) in enumerate(zip(params, types, strict=True)):
            source = p["source"]
            if source == "runtime:ith":
                args.append("ith")
            elif source == "runtime:nth":
                args.append("nth")
            else:
                args.append(_slot_expr(t, j))
        lines.append(f"void km_bench_t{i}(const uint64_t *s, int ith, int nth);")
        lines.append(f"void km_bench_t{i}(const uint64_t *s, int ith, int nth) {{ "
                     f"{var.symbol}({', '.join(args)}); }}")
    return "\n".join(lines) + "\n"


def _slots(raw: dict[str, Any], work: Workload, override: dict[str, np.ndarray] | None = None) -> np.ndarray:
    """The uint64 argument slots of one call (pointers, dims, params as bits, runtime values)."""
    buffers = {**work.buffers, **(override or {})}
    params = raw["call_abi"]["params"]
    out = np.zeros(max(len(params), 1), dtype=np.uint64)
    for j, p in enumerate(params):
        kind, _, name = p["source"].partition(":")
        ctype = _c_type(p, raw)
        if kind in _POINTER_KINDS:
            buf = buffers.get(name)
            value = 0 if buf is None else buf.ctypes.data
        elif kind == "dim":
            value = work.dims[name]
        elif kind == "runtime":
            value = work.runtime.get(name, 0)
        elif kind == "param":
            value = work.params.get(name, 0)
        else:
            value = float(name) if "." in name else int(name)
        if ctype == "float":
            out[j] = int(np.float32(value).view(np.uint32))
        elif ctype == "double":
            out[j] = int(np.float64(value).view(np.uint64))
        elif ctype.endswith("*"):
            out[j] = int(value)
        else:
            out[j] = int(value) & 0xFFFFFFFFFFFFFFFF
    return out


class _Library:
    """A built bench library: the harness plus trampolines for one provider's runnable variants."""

    def __init__(self, path: Path) -> None:
        self.lib = ctypes.CDLL(str(path))
        self.lib.km_bench_run.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_int,
                                          ctypes.c_int, ctypes.c_int, ctypes.POINTER(ctypes.c_double)]
        self.lib.km_bench_run.restype = ctypes.c_int

    def fn(self, name: str) -> int:
        return ctypes.cast(getattr(self.lib, name), ctypes.c_void_p).value or 0


def time_call(lib: _Library, fn_addr: int, slots: np.ndarray, nth: int, min_time: float,
              max_reps: int = 200, best: bool = False) -> tuple[float, int]:
    """Median (or, with `best`, minimum) seconds of one team call and the number of timed repetitions (>= 3).

    `slots` is one argument set (1-D) or several (2-D, one row each) that successive calls rotate over.
    """
    times = time_calls(lib, fn_addr, slots, nth, min_time, max_reps)
    return float(min(times) if best else statistics.median(times)), len(times)


def time_calls(lib: _Library, fn_addr: int, slots: np.ndarray, nth: int, min_time: float,
               max_reps: int = 200) -> list[float]:
    """Seconds of each timed team call (>= 3 of them, about `min_time` in all, at most `max_reps`)."""
    sets = np.ascontiguousarray(slots.reshape(-1, slots.shape[-1]), dtype=np.uint64)
    nsets, nslots = sets.shape
    probe = np.zeros(1, dtype=np.float64)
    if lib.lib.km_bench_run(fn_addr, sets.ctypes.data, nslots, nsets, nth, 1,
                            probe.ctypes.data_as(ctypes.POINTER(ctypes.c_double))) != 0:
        raise BuildError("the bench harness could not start its threads", value=nth)
    reps = int(min(max_reps, max(3, math.ceil(min_time / max(float(probe[0]), 1e-7)))))
    times = np.zeros(reps, dtype=np.float64)
    lib.lib.km_bench_run(fn_addr, sets.ctypes.data, nslots, nsets, nth, reps,
                         times.ctypes.data_as(ctypes.POINTER(ctypes.c_double)))
    return [float(t) for t in times]


class StreamProbe:
    """The streaming read (harness.c's km_bench_stream_call) over one huge_buffer of `size_bytes`, built once:
    `read(nth, min_time)` returns (fastest pass, median pass) in GB/s, each the best over STREAM_PREFETCH_HINTS."""

    def __init__(self, size_bytes: int) -> None:
        self.lib = _Library(build_shared([_harness_unit(target_features())], name="km_bench_stream",
                                         link_flags=("-pthread",)))
        self.size = max(64, size_bytes - size_bytes % 64)
        self.buf = huge_buffer(self.size)
        self.buf[:] = 1
        self.sink = np.zeros(8 * 256, dtype=np.uint64)

    def read(self, nth: int, min_time: float) -> tuple[float, float]:
        fastest = median = 0.0
        for hint in STREAM_PREFETCH_HINTS:  # the best of the plain and the prefetched reads
            slots = np.array([self.buf.ctypes.data, self.size, self.sink.ctypes.data, hint], dtype=np.uint64)
            times = time_calls(self.lib, self.lib.fn("km_bench_stream_call"), slots, int(nth), min_time, max_reps=20)
            fastest = max(fastest, self.size / min(times) / 1e9)
            median = max(median, self.size / statistics.median(times) / 1e9)
        return fastest, median


def measure_bandwidth(threads: Sequence[int] = (1, 2), size_bytes: int = 512 << 20,
                      min_time: float = 0.3, repeats: int = 1,
                      samples: dict[int, list[float]] | None = None,
                      typical: dict[int, list[float]] | None = None) -> dict[int, float]:
    """Streaming-read bandwidth in GB/s (1e9 bytes/s) per thread count, over a buffer of `size_bytes`.

    One measurement keeps the fastest of several passes: the figure is a ceiling, and on a shared
    machine the slower passes measure other processes' traffic. Even that ceiling moves by a quarter
    between runs on a shared VM, so `repeats` measurements (thread counts interleaved) are taken and
    their median returned; each one is appended to `samples[threads]` when given.

    Each measurement runs the read plainly and with each software-prefetch hint the decode GEMVs use
    (STREAM_PREFETCH_HINTS, harness.c) and keeps the best: on Zen 5 the prefetched reads were 10-20% faster, and
    kernels with prefetch read above a ceiling measured without it.

    `typical`, when given, gets each measurement's median pass as well (appended per thread count): the figure a
    kernel point's median call compares with like for like. On a quiet machine the two agree; on a shared one the
    fastest pass can be well above what a typical pass reads (the EPYC VM of December 2026: 2 threads, fastest
    46-58 GB/s, median 35-40), and a median kernel time over the fastest pass then reads as a share no streaming
    loop reaches in a typical run either.
    """
    probe = StreamProbe(size_bytes)
    got: dict[int, list[float]] = {int(nth): [] for nth in threads}
    for _ in range(max(1, int(repeats))):
        for nth in threads:
            fastest, median = probe.read(int(nth), min_time)
            got[int(nth)].append(fastest)
            if typical is not None:
                typical.setdefault(int(nth), []).append(median)
    if samples is not None:
        for nth, values in got.items():
            samples.setdefault(nth, []).extend(values)
    return {nth: statistics.median(values) for nth, values in got.items()}


def rebase_bandwidth(report: BenchReport, samples: dict[int, list[float]],
                     typical: dict[int, list[float]] | None = None) -> None:
    """Set the report's bandwidth to the median of `samples` (e.g. measured before and after the kernels, so
    a drift of the machine during a long run shows) and recompute every point's share of it; with `typical`
    (measure_bandwidth's median passes) the typical bandwidth and every point's share of that too."""
    report.bandwidth_samples = {int(k): list(v) for k, v in samples.items() if v}
    report.bandwidth = {k: statistics.median(v) for k, v in report.bandwidth_samples.items()}
    if typical is not None:
        report.bandwidth_typical_samples = {int(k): list(v) for k, v in typical.items() if v}
        report.bandwidth_typical = {k: statistics.median(v) for k, v in report.bandwidth_typical_samples.items()}
    for i, r in enumerate(report.results):
        bw = report.bandwidth.get(r.threads)
        typ = report.bandwidth_typical.get(r.threads)
        report.results[i] = replace(r, frac_bw=(r.gbps / bw) if bw else None,
                                    frac_bw_typical=(r.gbps / typ) if typ else None)


def int8_peak_kind(requires: Sequence[str]) -> tuple[str, int, str, int] | None:
    """The INT8_PEAK_KINDS entry of a variant with these `requires` (None: a scalar or non-x86 variant)."""
    for kind in INT8_PEAK_KINDS:
        if kind[0] in requires:
            return kind
    return None


def measure_int8_peak(instructions: Sequence[str], threads: Sequence[int] = (1, 2),
                      min_time: float = 0.05, *, lane: bool = False) -> dict[tuple[str, int], float]:
    """The measured int8 multiply-add peak in GMAC/s per (instruction, thread count): each thread of the team
    runs 12 independent chains of the instruction for a fixed count; products / fastest wall time. With `lane`,
    the peak of the instruction's lane step instead (LANE_STEP_KINDS: independent steps of the whole sequence
    the contracts need per dot).

    Instructions the CPU lacks (or names not in INT8_PEAK_KINDS) are left out.
    """
    features = target_features()
    kinds = [k for k in INT8_PEAK_KINDS if k[2] in instructions and k[0] in features]
    if not kinds:
        return {}
    lib = _Library(build_shared([_harness_unit(features)], name="km_bench_stream", link_flags=("-pthread",)))
    sink = np.zeros(8 * 256, dtype=np.uint64)
    out = {}
    for _, code, instr, products in kinds:
        code = LANE_STEP_KINDS[instr] if lane else code
        steps = int(lib.lib.km_bench_peak_steps(code))
        slots = np.array([_PEAK_ITERS, code, sink.ctypes.data], dtype=np.uint64)
        for nth in threads:
            fastest, _ = time_call(lib, lib.fn("km_bench_peak_call"), slots, int(nth), min_time, max_reps=50,
                                   best=True)
            out[(instr, int(nth))] = int(nth) * _PEAK_ITERS * steps * products / fastest / 1e9
    return out


def _int8_linear(provider: BenchProvider) -> bool:
    """A linear provider whose integer dots run on int8 (quantized weights, not f16/bf16/f32)."""
    weight = str(provider.raw.get("quant", {}).get("weight", ""))
    return provider.interface == GEMV_INTERFACE and weight.startswith(("q", "iq"))


def _build_provider(provider: BenchProvider, variants: Sequence[BenchVariant],
                    features: frozenset[str]) -> _Library:
    sources: dict[str, tuple[str, ...]] = {}
    for var in variants:
        sources.setdefault(var.source, var.cflags)
    text = trampoline_source(provider.raw, variants)
    digest = hashlib.sha256(text.encode()).hexdigest()[:12]
    with tempfile.TemporaryDirectory(prefix="km-bench-") as tmp:
        tramp = Path(tmp) / f"bench_{provider.id}_{digest}.c"
        tramp.write_text(text)
        units = [CompileUnit(KERNEL_ROOT / src, flags) for src, flags in sorted(sources.items())]
        units += [CompileUnit(tramp), _harness_unit(features)]
        path = build_shared(units, name=f"bench_{provider.id}", link_flags=("-pthread",))
    return _Library(path)


def llc_bytes() -> int:
    """Size of the largest CPU cache (sysfs), or 32 MiB when it cannot be read."""
    best = 0
    for path in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*/size"):
        try:
            text = path.read_text().strip().upper()
            mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
            best = max(best, int(text.rstrip("KMG")) * mult)
        except (OSError, ValueError):
            continue
    return best or (32 << 20)


HUGE_PAGE = 2 << 20
STREAM_PREFETCH_HINTS = (0, 1, 2)  # km_bench_stream_call's slots[3]: none, to L2, non-temporal


def huge_buffer(nbytes: int) -> np.ndarray:
    """A zeroed uint8 array of `nbytes` in private anonymous memory, 2 MiB-aligned and advised for transparent huge
    pages: where a generated model keeps its weights and KV cache (codegen/templates/model.c.in, km_map_huge), so a
    kernel point streams its weights through the same kind of pages a model run does (4 KiB pages read 10-25%
    slower on Zen 5). The advice is best effort (a kernel without transparent huge pages: plain pages)."""
    span = max(1, int(nbytes)) + HUGE_PAGE
    region = mmap.mmap(-1, span, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    whole = np.frombuffer(region, dtype=np.uint8)  # keeps `region` alive
    off = (-whole.ctypes.data) % HUGE_PAGE
    if hasattr(region, "madvise") and hasattr(mmap, "MADV_HUGEPAGE"):
        try:
            region.madvise(mmap.MADV_HUGEPAGE, off, span - off)
        except OSError:
            pass
    return whole[off:off + int(nbytes)]


def _weight_sets(weights: dict[str, np.ndarray], cold_bytes: int) -> list[dict[str, np.ndarray]]:
    """The weights plus enough copies that rotating over them streams `cold_bytes` (max 4096 sets), every set in one
    huge_buffer region, each array 64-byte aligned and the sets back to back (as a model's tensors lie in its
    weights memory)."""
    total = sum(a.nbytes for a in weights.values())
    if not weights or total == 0:
        return [weights]
    count = 1 if cold_bytes <= total else min(4096, math.ceil(cold_bytes / total))
    offsets, at = {}, 0
    for name, arr in weights.items():
        offsets[name] = at
        at += -(-arr.nbytes // 64) * 64
    region = huge_buffer(at * count)
    sets = []
    for c in range(count):
        one = {}
        for name, arr in weights.items():
            src = np.ascontiguousarray(arr)
            dst = region[c * at + offsets[name]:c * at + offsets[name] + src.nbytes].view(src.dtype).reshape(src.shape)
            dst[...] = src
            one[name] = dst
        sets.append(one)
    return sets


def run_bench(providers: Sequence[BenchProvider], *, rows: Sequence[int] = (1, 16, 128),
              threads: Sequence[int] = (1, 2), min_time: float = 0.1, bandwidth: dict[int, float] | None = None,
              cold: bool = True, progress: Callable[[str], None] | None = None,
              shapes: Sequence[str] | None = None, adjacent: StreamProbe | None = None,
              adjacent_time: float = 0.05) -> BenchReport:
    """Time each runnable variant of each provider at its interface's shapes for every rows x threads.

    With `cold` (the default), successive calls rotate over copies of the weights that together
    exceed three times the last-level cache, so weights come from memory as in a decode step.
    `shapes`, when given, keeps only the cases with those labels (e.g. "262144x640").
    With `adjacent` (a StreamProbe), every one-row point is bracketed by the streaming read at its thread count
    (about `adjacent_time` per hint, right before and right after it): `bw_adjacent` is the mean of the two
    median passes and `frac_bw_adjacent` the point's share of it. On a shared host whose bandwidth moves by a
    quarter within minutes this compares the point with what the machine streamed at that moment.
    """
    cold_bytes = 3 * llc_bytes() if cold else 0
    features = target_features()
    report = BenchReport(bandwidth=dict(bandwidth or {}))
    wanted = {k[2] for p in providers if _int8_linear(p) for v in p.variants
              if (k := int8_peak_kind(v.requires)) is not None}
    if wanted and any(m > 1 for m in rows):
        if progress:
            progress("measuring the int8 peak...")
        report.int8_peak = measure_int8_peak(sorted(wanted), threads)
        report.lane_peak = measure_int8_peak(sorted(wanted), threads, lane=True)
    for provider in providers:
        entry, cases = bench_cases(provider.interface)
        if shapes is not None:
            cases = [c for c in cases if c["label"] in shapes]
        if not cases:
            report.skipped.append({"provider": provider.id, "variant": "*",
                                   "reason": f"no_bench_shapes:{provider.interface}"})
            continue
        runnable = []
        for var in provider.variants:
            lacking = missing(var.requires, features)
            if lacking:
                report.skipped.append({"provider": provider.id, "variant": var.name,
                                       "reason": "isa_unavailable:" + ",".join(lacking)})
            else:
                runnable.append(var)
        if not runnable:
            continue
        try:
            lib = _build_provider(provider, runnable, features)
        except KernelmapError as exc:
            report.errors.append({"provider": provider.id, "error": str(exc).splitlines()[0]})
            continue
        for case in cases:
            try:
                weights = weight_data(provider.raw, {"M": 1, **case.get("dims", {})})
            except (KeyError, ValueError) as exc:
                report.skipped.append({"provider": provider.id, "variant": "*", "shape": case["label"],
                                       "reason": f"no_bench_value_for_dim:{exc}"})
                continue
            weight_sets = _weight_sets(weights, cold_bytes)
            for m in rows:
                try:
                    work = make_workload(provider.raw, entry, case, int(m), weights=weights)
                except (KeyError, ValueError) as exc:
                    work = f"no_bench_value:{exc}"
                if isinstance(work, str):
                    report.skipped.append({"provider": provider.id, "variant": "*", "shape": case["label"],
                                           "rows": int(m), "reason": work})
                    continue
                slots = np.stack([_slots(provider.raw, work, ws) for ws in weight_sets])
                for i, var in enumerate(runnable):
                    rule = var_constraint_failure(provider.raw, var.name, work.dims)
                    if rule:
                        report.skipped.append({"provider": provider.id, "variant": var.name,
                                               "shape": case["label"], "rows": int(m), "reason": rule})
                        continue
                    for nth in threads:
                        if progress:
                            progress(f"{provider.id} {var.name} {case['label']} rows={m} threads={nth}")
                        adj = None
                        if adjacent is not None and int(m) == 1:
                            adj = adjacent.read(int(nth), adjacent_time)[1]
                        median, reps = time_call(lib, lib.fn(f"km_bench_t{i}"), slots, int(nth), min_time)
                        if adj is not None:
                            adj = (adj + adjacent.read(int(nth), adjacent_time)[1]) / 2
                        gbps = work.bytes_moved / median / 1e9
                        bw = report.bandwidth.get(int(nth))
                        gmacs = kind = peak = lane = None
                        if _int8_linear(provider) and work.flops:
                            gmacs = work.flops / 2 / median / 1e9
                            kind = int8_peak_kind(var.requires)
                            peak = report.int8_peak.get((kind[2], int(nth))) if kind else None
                            if kind and provider.raw.get("quant", {}).get("weight") in LANE_STEP_WEIGHTS:
                                lane = report.lane_peak.get((kind[2], int(nth)))
                        report.results.append(BenchResult(
                            provider=provider.id, variant=var.name, interface=provider.interface,
                            shape=case["label"], rows=int(m), threads=int(nth), median_s=median, reps=reps,
                            bytes_moved=work.bytes_moved, flops=work.flops, gbps=gbps,
                            gops=(work.flops / median / 1e9) if work.flops else None,
                            frac_bw=(gbps / bw) if bw else None, gmacs=gmacs,
                            peak_instr=kind[2] if kind else None, frac_peak=(gmacs / peak) if gmacs and peak else None,
                            frac_lane=(gmacs / lane) if gmacs and lane else None,
                            bw_adjacent=adj, frac_bw_adjacent=(gbps / adj) if adj else None))
    return report


def var_constraint_failure(raw: dict[str, Any], variant: str, dims: dict[str, int]) -> str | None:
    """The first failing variant-level constraint of `variant` at these dims, or None."""
    for var in raw.get("variants", []):
        if var.get("name") == variant and var.get("constraints"):
            return constraint_failure(var["constraints"], dims)
    return None


def resolver_variants(providers: Sequence[BenchProvider], features: frozenset[str]) -> list[BenchProvider]:
    """Each provider with only the variant the resolver would pick here: the highest-priority runnable one."""
    out = []
    for p in providers:
        runnable = [v for v in p.variants if not missing(v.requires, features)]
        if runnable:
            out.append(replace(p, variants=(max(runnable, key=lambda v: v.priority),)))
    return out


def gemv_summary(report: BenchReport, providers: Sequence[BenchProvider], policy: Any = None) -> list[dict[str, Any]]:
    """The decode GEMV points (one-row linear calls): per provider, shape and thread count the fastest variant
    measured, its weight type, GB/s and share of the read bandwidth, and whether it is under `GEMV_FLOOR`.

    With a numerics `policy` (kernelmap.numerics.Policy), each row also says whether a build with that policy
    would run it (`in_policy`): the policy's linear rule for the weight type names the provider's contract, and of
    the providers of that contract measured at the same shape and thread count it is the one the resolver ranks
    first (one with a SIMD variant before one with only its ref, then the higher selection priority; q4_0's
    GGUF-layout provider, say, is measured but a build on x86 runs its q32_r8 one).
    """
    weight = {p.id: p.raw.get("quant", {}).get("weight", "?") for p in providers}
    contract = {p.id: p.raw.get("numerics", {}).get("contract") for p in providers}
    chosen: dict[str, str | None] = {}
    if policy is not None:
        for w in set(weight.values()):
            hits = [r for r in policy.rules if r.op == "linear" and r.matches({"weight": w})]
            chosen[w] = hits[0].contract if len(hits) == 1 else None
    best: dict[tuple[str, str, int], BenchResult] = {}
    for r in report.results:
        if r.rows != 1 or r.interface != GEMV_INTERFACE:
            continue
        key = (r.provider, r.shape, r.threads)
        if key not in best or r.gbps > best[key].gbps:
            best[key] = r
    priority = {p.id: int(p.raw.get("selection", {}).get("priority", 0)) for p in providers}
    first: dict[tuple[str, str, int], str] = {}  # (contract, shape, threads) -> the provider the resolver ranks first
    for (provider, shape, threads), r in best.items():
        key = (str(contract.get(provider)), shape, threads)
        rank = (r.variant != "ref", priority.get(provider, 0), provider)
        if key not in first or rank > (best[(first[key], shape, threads)].variant != "ref",
                                       priority.get(first[key], 0), first[key]):
            first[key] = provider
    rows = []
    for (provider, shape, threads), r in sorted(best.items(), key=lambda kv: (weight.get(kv[0][0], "?"), kv[0])):
        selected = (chosen.get(weight.get(provider, "?")) == contract.get(provider) is not None
                    and first.get((str(contract.get(provider)), shape, threads)) == provider)
        rows.append({"weight": weight.get(provider, "?"), "provider": provider, "variant": r.variant,
                     "shape": shape, "threads": threads, "median_us": r.median_s * 1e6, "gbps": r.gbps,
                     "frac_bw": r.frac_bw, "below_floor": r.frac_bw is not None and r.frac_bw < GEMV_FLOOR,
                     "frac_bw_typical": r.frac_bw_typical,
                     "below_floor_typical": r.frac_bw_typical is not None and r.frac_bw_typical < GEMV_FLOOR,
                     "bw_adjacent": r.bw_adjacent, "frac_bw_adjacent": r.frac_bw_adjacent,
                     "below_floor_adjacent": r.frac_bw_adjacent is not None and r.frac_bw_adjacent < GEMV_FLOOR,
                     "in_policy": None if policy is None else selected})
    return rows


def prefill_summary(report: BenchReport, providers: Sequence[BenchProvider], rows: int = 128) -> list[dict[str, Any]]:
    """The prefill GEMM points (`rows`-row int8 linear calls): per provider, shape and thread count the fastest
    variant measured, its weight type, GMAC/s, instruction and share of that instruction's measured peak."""
    weight = {p.id: p.raw.get("quant", {}).get("weight", "?") for p in providers}
    best: dict[tuple[str, str, int], BenchResult] = {}
    for r in report.results:
        if r.rows != rows or r.gmacs is None:
            continue
        key = (r.provider, r.shape, r.threads)
        if key not in best or r.gmacs > (best[key].gmacs or 0.0):
            best[key] = r
    out = []
    for (provider, shape, threads), r in sorted(best.items(), key=lambda kv: (weight.get(kv[0][0], "?"), kv[0])):
        out.append({"weight": weight.get(provider, "?"), "provider": provider, "variant": r.variant, "shape": shape,
                    "rows": r.rows, "threads": threads, "median_us": r.median_s * 1e6, "gmacs": r.gmacs,
                    "instruction": r.peak_instr,
                    "peak_gmacs": report.int8_peak.get((r.peak_instr, threads)) if r.peak_instr else None,
                    "frac_peak": r.frac_peak,
                    "lane_gmacs": report.lane_peak.get((r.peak_instr, threads)) if r.frac_lane is not None else None,
                    "frac_lane": r.frac_lane})
    return out
