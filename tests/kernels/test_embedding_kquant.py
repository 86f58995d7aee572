"""Differential tests for the K-quant embedding lookups (embedding_q2_k .. embedding_q6_k, contracts embedding.<t>.f32.v1).

Every SIMD variant this host runs (instantiations of embedding/q_k_embedding_body.h) must be bit-exact
with its ref for every (ith, nth) on random tables (every code, scale and min byte random, finite d and
dmin of both signs, tiny to huge); the ref's rows must equal gguf.quants.dequantize(row) * scale in f32
bit for bit (the same f32 operations as llama.cpp's dequantize_row_<t>; tests/kernels/test_ops_vs_llama_kquant.py
compares with llama.cpp's own dequantize_row on real rows).
"""

from __future__ import annotations

import numpy as np
import pytest
from kernel_harness import (
    assert_close_or_equal,
    bind,
    load_map_library,
    map_variants,
    ptr,
    skip_unless_runnable,
)

import gguf

T = gguf.GGMLQuantizationType
TYPES = ["q2_k", "q3_k", "q4_k", "q5_k", "q6_k"]
MAP_IDS = {"q2_k": "embedding_q2_k", "q3_k": "embedding_q3_k", "q4_k": "embedding_q4_k", "q5_k": "embedding_q5_k",
           "q6_k": "embedding_q6_k"}
QTYPE = {"q2_k": T.Q2_K, "q3_k": T.Q3_K, "q4_k": T.Q4_K, "q5_k": T.Q5_K, "q6_k": T.Q6_K}
BLOCK = {"q2_k": 84, "q3_k": 110, "q4_k": 144, "q5_k": 176, "q6_k": 210}
D_OFFSETS = {"q2_k": (80, 82), "q3_k": (108,), "q4_k": (0, 2), "q5_k": (0, 2), "q6_k": (208,)}
SCALE = float(np.float32(np.sqrt(640.0)))
# (name, V, blocks per row, ids, scale, magnitude of d / dmin)
CASES = [("one_row_one_block", 1, 1, [0], 1.0, 0.05), ("odd_blocks_repeats", 9, 3, [8, 0, 3, 3, 7], SCALE, 0.05),
         ("many_rows", 23, 2, list(range(22, -1, -2)), 0.5, 1.0), ("large_magnitudes", 5, 2, [4, 1, 2], 3.5, 6e4),
         ("tiny_magnitudes", 4, 1, [3, 0], SCALE, 1e-7)]


def _table(t: str, v: int, nb: int, seed: int, mag: float) -> np.ndarray:
    rng = np.random.default_rng(seed)
    raw = rng.integers(0, 256, size=(v, nb, BLOCK[t]), dtype=np.uint8)
    for off in D_OFFSETS[t]:
        d = (rng.uniform(-1, 1, (v, nb)) * mag).astype(np.float16)
        raw[:, :, off:off + 2] = d.view(np.uint8).reshape(v, nb, 2)
    return raw.reshape(v, -1)


def _run(fn, table: np.ndarray, ids: np.ndarray, d: int, scale: float, nth: int) -> np.ndarray:
    y = np.full((ids.shape[0], d), np.nan, np.float32)
    for ith in range(nth):
        fn(ptr(y), ptr(table), ptr(ids), ids.shape[0], table.shape[0], d, scale, ith, nth)
    return y


# every (type, non-ref variant) the registry declares
TYPE_VARIANTS = [(t, v) for t in TYPES for v in map_variants(MAP_IDS[t], ref=False)]


@pytest.mark.parametrize("t,variant", TYPE_VARIANTS, ids=[f"{t}-{v}" for t, v in TYPE_VARIANTS])
def test_embedding_kquant_variants_match_ref(t: str, variant: str) -> None:
    map_id = MAP_IDS[t]
    skip_unless_runnable(map_id, variant)
    lib, spec = load_map_library(map_id)
    ref, fn = bind(lib, spec, "ref"), bind(lib, spec, variant)
    for i, (name, v, nb, ids, scale, mag) in enumerate(CASES):
        table = _table(t, v, nb, seed=10 + i, mag=mag)
        ids_a = np.asarray(ids, dtype=np.int32)
        want = _run(ref, table, ids_a, nb * 256, scale, 1)
        for nth in (1, 2, 3, 7):
            assert_close_or_equal(want, _run(fn, table, ids_a, nb * 256, scale, nth), map_id=map_id,
                                  variant=variant, context=f"{name} V={v} nb={nb} nth={nth}")


@pytest.mark.parametrize("t", TYPES)
def test_embedding_kquant_ref_matches_gguf_dequantize(t: str) -> None:
    map_id = MAP_IDS[t]
    assert "ref" in map_variants(map_id)
    lib, spec = load_map_library(map_id)
    ref = bind(lib, spec, "ref")
    for i, (name, v, nb, ids, scale, mag) in enumerate(CASES):
        table = _table(t, v, nb, seed=20 + i, mag=mag)
        ids_a = np.asarray(ids, dtype=np.int32)
        deq = gguf.quants.dequantize(table[ids_a], QTYPE[t]).astype(np.float32)
        want = (deq * np.float32(scale)).astype(np.float32)
        assert_close_or_equal(want, _run(ref, table, ids_a, nb * 256, scale, 2), map_id=map_id, variant="ref",
                              context=f"gguf oracle, {name} nb={nb}")
