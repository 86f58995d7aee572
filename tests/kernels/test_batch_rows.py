"""Differential tests of the batch phase's per-row wrappers (kernel maps with `calls`): each variant,
run on M rows with their own positions and KV slots, writes exactly the bytes of one call of the
called decode kernel per row (M = 1, that row's position, that slot's cache), for several thread
counts; and every variant equals the wrapper's ref. The wrappers are enumerated from the registry."""

from __future__ import annotations

import ctypes
import functools

import numpy as np
import pytest
from kernel_harness import assert_close_or_equal, host_arch, map_variants, registry, skip_unless_runnable

from kernelmap.build.driver import KERNEL_ROOT, CompileUnit, build_shared
from kernelmap.isa_flags import flags_arch

WRAPPERS = sorted(pid for pid, p in registry().providers.items() if p.raw.get("calls"))
CASES = [(pid, v) for pid in WRAPPERS for v in map_variants(pid)]
IDS = [f"{pid}-{v}" for pid, v in CASES]

M, S, C = 3, 5, 16  # rows, KV slots, context per slot
DIMS = {"H": 2, "Hq": 4, "Hkv": 2, "D": 32}
POSITIONS = np.array([9, 0, 15], dtype=np.int64)
SLOTS = np.array([3, 0, 4], dtype=np.int64)


def test_batch_rows_wrappers_cover_every_position_dependent_op():
    ops = {registry().providers[pid].op for pid in WRAPPERS}
    assert ops == {"rope", "kv_append", "attention", "qk_norm_rope", "rope_ff", "attention_kq"}
    # by name, so a new wrapper is a visible change here (and the audit sees each map's test)
    assert WRAPPERS == ["attention_f16kv_ggmlfa_dot32_rows", "attention_f16kv_ggmlfa_rows", "attention_f16kv_rows", "attention_f32kv_rows",
                        "attention_kq_f16kv_ggmlfa_dot32_rows", "attention_kq_f16kv_ggmlfa_rows",
                        "attention_kq_q8_0kv_rot_ggmlfa_rows",
                        "attention_q8_0kv_rot_ggmlfa_rows", "kv_append_f16_rows", "kv_append_f32_rows",
                        "kv_append_q8_0_rotk_rows", "kv_append_q8_0_rotv_rows", "qk_norm_rope_neox_f32_rows", "rope_ff_neox_f32_rows", "rope_ff_normal_f32_rows",
                        "rope_neox_f32_rows", "rope_normal_f32_rows"]


@functools.cache
def _lib(pid: str) -> ctypes.CDLL:
    """One library with every host-runnable variant of the wrapper and of the map it calls."""
    units = {}
    for prov in (registry().providers[pid], *(registry().providers[c] for c in registry().providers[pid].raw["calls"])):
        for v in prov.variants:
            if flags_arch(v.cflags) not in (None, host_arch()):
                continue  # another architecture's variant (tests/aarch64 runs those under qemu)
            units[(v.source, tuple(v.cflags))] = CompileUnit(KERNEL_ROOT / v.source, tuple(v.cflags))
    return ctypes.CDLL(str(build_shared([units[k] for k in sorted(units)], name=f"test_{pid}")))


def _fn(lib: ctypes.CDLL, spec: dict, symbol: str):
    types = {p["name"]: p["type"] for p in spec.get("params", [])}
    argtypes = []
    for entry in spec["call_abi"]["params"]:
        kind, _, name = entry["source"].partition(":")
        if kind in ("output", "activation", "weight", "state") or name in ("positions", "slots"):
            argtypes.append(ctypes.c_void_p)
        elif kind == "runtime" and name in ("ith", "nth"):
            argtypes.append(ctypes.c_int)
        elif kind == "param":
            argtypes.append(ctypes.c_float if types[name] == "float" else ctypes.c_int64)
        else:
            argtypes.append(ctypes.c_int64)
    fn = getattr(lib, symbol)
    fn.argtypes, fn.restype = argtypes, None
    return fn


def _p(a: np.ndarray) -> int:
    return a.ctypes.data


def _dim_d(pid: str) -> int:
    """The head size a wrapper runs at: 32, or 64 for the q8_0 caches (their rotation needs D % 64 == 0)."""
    return 64 if "q8_0" in pid else DIMS["D"]


def _cache(rng: np.random.Generator, elem: type | None, heads: int, d: int) -> np.ndarray:
    """Random per-slot caches [S][heads][C] rows: f16/f32 values, or (elem None) q8_0 blocks of an f16
    scale in [0.01, 0.02) and 32 int8 quants, as raw bytes [S][heads][C][D / 32 * 34]."""
    if elem is not None:
        return rng.standard_normal((S, heads, C, d)).astype(elem)
    nb = d // 32
    scale = (0.01 + 0.01 * rng.random((S, heads, C, nb, 1))).astype(np.float16).view(np.uint8)
    quants = rng.integers(-127, 128, (S, heads, C, nb, 32), dtype=np.int8).view(np.uint8)
    return np.ascontiguousarray(np.concatenate([scale, quants], axis=-1).reshape(S, heads, C, nb * 34))


def _buffers(op: str, elem: type | None, rng: np.random.Generator, d: int = DIMS["D"]) -> dict[str, np.ndarray]:
    if op in ("rope", "qk_norm_rope", "rope_ff"):
        return {"x": rng.standard_normal((M, DIMS["H"] * d)).astype(np.float32),
                "w": (1 + 0.1 * rng.standard_normal(d)).astype(np.float32),  # rope_ff: its first D/2 are factors
                "y": np.full((M, DIMS["H"] * d), np.nan, np.float32)}
    if op == "kv_append":
        cache = _cache(rng, elem, DIMS["H"], d)
        return {"x": rng.standard_normal((M, DIMS["H"] * d)).astype(np.float32), "cache": cache}
    k = _cache(rng, elem, DIMS["Hkv"], d)
    v = _cache(rng, elem, DIMS["Hkv"], d)
    return {"q": rng.standard_normal((M, DIMS["Hq"] * d)).astype(np.float32), "k": k, "v": v,
            "y": np.full((M, DIMS["Hq"] * d), np.nan, np.float32)}


def _run(op: str, fn, one, b: dict[str, np.ndarray], nth: int, window: int, per_row: bool,
         d: int = DIMS["D"]) -> np.ndarray:
    """Run the wrapper on all rows (per_row False) or the called kernel once per row (per_row True)."""
    pos, slots = POSITIONS, SLOTS
    for ith in range(nth):
        if op == "rope" and not per_row:
            fn(_p(b["y"]), _p(b["x"]), M, DIMS["H"], d, _p(pos), 10000.0, 1.0, ith, nth)
        elif op == "rope":
            for r in range(M):
                one(_p(b["y"][r]), _p(b["x"][r]), 1, DIMS["H"], d, int(pos[r]), 10000.0, 1.0, ith, nth)
        elif op == "rope_ff" and not per_row:
            fn(_p(b["y"]), _p(b["x"]), _p(b["w"]), M, DIMS["H"], d, _p(pos), 10000.0, 1.0, ith, nth)
        elif op == "rope_ff":
            for r in range(M):
                one(_p(b["y"][r]), _p(b["x"][r]), _p(b["w"]), 1, DIMS["H"], d, int(pos[r]), 10000.0, 1.0, ith, nth)
        elif op == "qk_norm_rope" and not per_row:
            fn(_p(b["y"]), _p(b["x"]), _p(b["w"]), M, DIMS["H"], d, _p(pos), 1e-6, 10000.0, 1.0, ith, nth)
        elif op == "qk_norm_rope":
            for r in range(M):
                one(_p(b["y"][r]), _p(b["x"][r]), _p(b["w"]), 1, DIMS["H"], d, int(pos[r]), 1e-6, 10000.0, 1.0,
                    ith, nth)
        elif op == "kv_append" and not per_row:
            fn(_p(b["cache"]), _p(b["x"]), M, DIMS["H"], d, C, _p(pos), _p(slots), ith, nth)
        elif op == "kv_append":
            for r in range(M):
                one(_p(b["cache"][slots[r]]), _p(b["x"][r]), 1, DIMS["H"], d, C, int(pos[r]), ith, nth)
        elif not per_row:
            fn(_p(b["y"]), _p(b["q"]), _p(b["k"]), _p(b["v"]), M, DIMS["Hq"], DIMS["Hkv"], d, C, _p(pos), _p(slots),
               0.125, window, ith, nth)
        else:
            for r in range(M):
                one(_p(b["y"][r]), _p(b["q"][r]), _p(b["k"][slots[r]]), _p(b["v"][slots[r]]), 1, DIMS["Hq"],
                    DIMS["Hkv"], d, C, int(pos[r]), 0.125, window, ith, nth)
    return b["cache"] if op == "kv_append" else b["y"]


def _elem(pid: str) -> type | None:
    """The cache's numpy type; None for a q8_0 cache (raw blocks)."""
    return None if "q8_0" in pid else np.float16 if "f16" in pid else np.float32


# the sliding window (0 = none, 5) is an attention parameter: other ops run with window 0 only
WINDOWED = [(pid, v, w) for pid, v in CASES for w in ((0, 5) if registry().providers[pid].op in ("attention", "attention_kq") else (0,))]


@pytest.mark.parametrize("pid,variant,window", WINDOWED, ids=[f"{p}-{v}-w{w}" for p, v, w in WINDOWED])
@pytest.mark.parametrize("nth", [1, 3])
def test_rows_wrapper_equals_one_decode_call_per_row(pid, variant, window, nth):
    skip_unless_runnable(pid, variant)
    wrapper = registry().providers[pid]
    callee = registry().providers[wrapper.raw["calls"][0]]
    lib = _lib(pid)
    fn = _fn(lib, wrapper.raw, wrapper.variant(variant).symbol)
    one = _fn(lib, callee.raw, callee.variant(variant).symbol)
    d = _dim_d(pid)
    got = _run(wrapper.op, fn, one, _buffers(wrapper.op, _elem(pid), np.random.default_rng(1), d), nth, window, False,
               d)
    want = _run(wrapper.op, fn, one, _buffers(wrapper.op, _elem(pid), np.random.default_rng(1), d), nth, window, True,
                d)
    assert_close_or_equal(want, got, map_id=pid, variant=variant,
                          context=f"M={M} slots={SLOTS.tolist()} positions={POSITIONS.tolist()} nth={nth}")


@pytest.mark.parametrize("pid,variant", [c for c in CASES if c[1] != "ref"],
                         ids=[i for c, i in zip(CASES, IDS, strict=True) if c[1] != "ref"])
def test_rows_wrapper_variants_identical_to_ref(pid, variant):
    skip_unless_runnable(pid, variant)
    wrapper = registry().providers[pid]
    callee = registry().providers[wrapper.raw["calls"][0]]
    lib = _lib(pid)
    outs = []
    for name in ("ref", variant):
        fn = _fn(lib, wrapper.raw, wrapper.variant(name).symbol)
        one = _fn(lib, callee.raw, callee.variant(name).symbol)
        d = _dim_d(pid)
        outs.append(_run(wrapper.op, fn, one, _buffers(wrapper.op, _elem(pid), np.random.default_rng(2), d), 2, 5,
                         False, d))
    assert_close_or_equal(outs[0], outs[1], map_id=pid, variant=variant,
                          comparison=wrapper.raw["numerics"]["comparison"], context="vs ref, nth=2")
