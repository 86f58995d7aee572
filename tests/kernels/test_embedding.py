"""Differential tests for the embedding lookups (q8_0, q5_0, q4_0, q4_1, q5_1, q4_k, q6_k, f16, bf16, f32 tables).

Oracles: every variant is bit-exact with its ref for every (ith, nth); the ref's rows equal
gguf.quants.dequantize(row) * scale in f32 bit for bit, on synthetic tables and on real tensors of
the Gemma 3 270M GGUF (one each of q8_0, q5_0, q4_k and q6_k, read with gguf.GGUFReader).
"""

from __future__ import annotations

import numpy as np
import pytest
from kernel_harness import (
    assert_close_or_equal,
    bind,
    guarded,
    load_map_library,
    map_variants,
    ptr,
    runnable_variants,
    skip_unless_runnable,
)

import gguf

T = gguf.GGMLQuantizationType
FORMATS = {
    "q8_0": (T.Q8_0, np.dtype([("d", "<f2"), ("qs", "i1", (32,))]), 32),
    "q5_0": (T.Q5_0, np.dtype([("d", "<f2"), ("qh", "u1", (4,)), ("qs", "u1", (16,))]), 32),
    "q4_0": (T.Q4_0, np.dtype([("d", "<f2"), ("qs", "u1", (16,))]), 32),
    "q4_1": (T.Q4_1, np.dtype([("d", "<f2"), ("m", "<f2"), ("qs", "u1", (16,))]), 32),
    "q5_1": (T.Q5_1, np.dtype([("d", "<f2"), ("m", "<f2"), ("qh", "u1", (4,)), ("qs", "u1", (16,))]), 32),
    "q4_k": (T.Q4_K, np.dtype([("d", "<f2"), ("dmin", "<f2"), ("scales", "u1", (12,)), ("qs", "u1", (128,))]), 256),
    "q6_k": (T.Q6_K, np.dtype([("ql", "u1", (128,)), ("qh", "u1", (64,)), ("scales", "i1", (16,)), ("d", "<f2")]), 256),
    "f16": (T.F16, np.dtype("<f2"), 1),
    "bf16": (T.BF16, np.dtype("<u2"), 1),
    "f32": (T.F32, np.dtype("<f4"), 1),
}
MAP_IDS = {"q8_0": "embedding_q8_0", "q5_0": "embedding_q5_0", "q4_0": "embedding_q4_0", "q4_1": "embedding_q4_1",
           "q5_1": "embedding_q5_1", "q4_k": "embedding_q4_k", "q6_k": "embedding_q6_k", "f16": "embedding_f16",
           "bf16": "embedding_bf16", "f32": "embedding_f32"}
SCALE = float(np.float32(np.sqrt(640.0)))
VARIANTS = [(fmt, v) for fmt in sorted(FORMATS) for v in map_variants(MAP_IDS[fmt])]


def _table(fmt: str, v: int, d: int, seed: int, big: bool = False) -> np.ndarray:
    """A random [V, bytes per row] uint8 table of `fmt` with finite scales."""
    _, dt, block = FORMATS[fmt]
    rng = np.random.default_rng(seed)
    if block == 1:
        vals = rng.standard_normal((v, d)) * (1e4 if big else 1.0)
        if fmt == "bf16":  # random bf16 bit patterns of finite values: the top halves of f32 values
            return np.ascontiguousarray(vals.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16).view(
                np.uint8).reshape(v, -1)
        return np.ascontiguousarray(vals.astype(dt)).view(np.uint8).reshape(v, -1)
    nb = d // block
    raw = rng.integers(0, 256, size=(v, nb * dt.itemsize), dtype=np.uint8)
    blocks = raw.view(dt).reshape(v, nb)
    mag = 3e3 if big else 0.05
    for field in ("d", "dmin", "m"):
        if field in dt.names:
            blocks[field] = (rng.uniform(-1, 1, (v, nb)) * mag).astype(np.float16)
    return raw


def _oracle(fmt: str, rows: np.ndarray, scale: float) -> np.ndarray:
    qtype = FORMATS[fmt][0]
    if fmt in ("f16", "f32"):
        deq = rows.view(FORMATS[fmt][1]).astype(np.float32)
    elif fmt == "bf16":
        deq = (rows.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
    else:
        deq = gguf.quants.dequantize(rows, qtype).astype(np.float32)
    return (deq * np.float32(scale)).astype(np.float32)


def _run(fn, table: np.ndarray, ids: np.ndarray, d: int, scale: float, nth: int) -> np.ndarray:
    m = ids.shape[0]
    y, check = guarded((m, d), np.float32)
    for ith in range(nth):
        fn(ptr(y), ptr(table), ptr(ids), m, table.shape[0], d, scale, ith, nth)
        check()
    return y.copy()


CASES = [  # (name, V, D multiplier in blocks, ids, scale, big)
    ("one_row_one_block", 1, 1, [0], 1.0, False),
    ("odd_blocks_repeats", 9, 3, [8, 0, 3, 3, 7], SCALE, False),
    ("large_magnitudes", 5, 2, [4, 1, 2], 3.5, True),
]


def _dims(fmt: str, blocks: int) -> int:
    block = FORMATS[fmt][2]
    return blocks * (block if block > 1 else 40) + (7 if block == 1 else 0)


@pytest.mark.parametrize("fmt,variant", VARIANTS, ids=[f"{f}-{v}" for f, v in VARIANTS])
def test_embedding_variants_match_ref(fmt: str, variant: str) -> None:
    map_id = MAP_IDS[fmt]
    skip_unless_runnable(map_id, variant)
    lib, spec = load_map_library(map_id)
    ref = bind(lib, spec, "ref")
    fn = bind(lib, spec, variant)
    cases = [*CASES, ("four_blocks", 6, 4, [5, 0, 2], SCALE, False)]
    for i, (name, v, blocks, ids, scale, big) in enumerate(cases):
        d = _dims(fmt, blocks)
        table = _table(fmt, v, d, seed=10 + i, big=big)
        ids_a = np.asarray(ids, dtype=np.int32)
        expected = _run(ref, table, ids_a, d, scale, 1)
        for nth in (1, 2, 3):
            assert_close_or_equal(expected, _run(fn, table, ids_a, d, scale, nth), map_id=map_id,
                                  variant=variant, context=f"{name} V={v} D={d} nth={nth}")


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_embedding_ref_matches_gguf_dequantize(fmt: str) -> None:
    map_id = MAP_IDS[fmt]
    lib, spec = load_map_library(map_id)
    ref = bind(lib, spec, "ref")
    for i, (name, v, blocks, ids, scale, big) in enumerate(CASES):
        d = _dims(fmt, blocks)
        table = _table(fmt, v, d, seed=20 + i, big=big)
        ids_a = np.asarray(ids, dtype=np.int32)
        assert_close_or_equal(_oracle(fmt, table[ids_a], scale), _run(ref, table, ids_a, d, scale, 2),
                              map_id=map_id, variant="ref", context=f"gguf oracle, {name} D={d}")


@pytest.fixture(scope="module")
def gemma_tensors(model_path: str) -> dict[str, object]:
    """The first tensor of each of q8_0, q5_0, q4_k, q6_k in the real Gemma 3 270M GGUF."""
    reader = gguf.GGUFReader(model_path)
    wanted = {T.Q8_0: "q8_0", T.Q5_0: "q5_0", T.Q4_K: "q4_k", T.Q6_K: "q6_k"}
    found: dict[str, object] = {}
    for tensor in reader.tensors:
        fmt = wanted.get(tensor.tensor_type)
        if fmt and fmt not in found:
            found[fmt] = tensor
    return found


@pytest.mark.model
@pytest.mark.parametrize("fmt", ["q8_0", "q5_0", "q4_k", "q6_k"])
def test_embedding_real_model_rows_match_gguf(fmt: str, gemma_tensors: dict[str, object]) -> None:
    tensor = gemma_tensors[fmt]
    data = np.ascontiguousarray(tensor.data)  # type: ignore[attr-defined]
    rows, row_bytes = data.shape
    d = int(tensor.shape[0])  # type: ignore[attr-defined]
    rng = np.random.default_rng(99)
    ids = np.unique(np.concatenate([[0, 1, rows - 1], rng.integers(0, rows, 61)])).astype(np.int32)
    map_id = MAP_IDS[fmt]
    lib, spec = load_map_library(map_id)
    for scale in (1.0, SCALE):
        expected = _oracle(fmt, data[ids], scale)
        for variant in runnable_variants(map_id):
            got = _run(bind(lib, spec, variant), data, ids, d, scale, 2)
            assert_close_or_equal(expected, got, map_id=map_id, variant=variant,
                                  context=f"{tensor.name} ({rows}x{d}, {row_bytes} bytes/row) scale={scale}")  # type: ignore[attr-defined]
