"""Differential tests for the 32-block linear kernels (q8_0, q5_0, q4_0 weights x q8_0 activations).

Every variant must be byte-identical to its map's ref for every (ith, nth) on random and edge
shapes, with canaries around the output; the ref must equal an independent NumPy statement of the
contract (per-block exact int sums, f32 scale products, fma into partial b mod 8, fixed tree).
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
    skip_unless_runnable,
)
from q32_oracle import linear_q32_numpy, random_blocks

MAP_IDS = {"q8_0": "linear_q8_0_q8_0", "q5_0": "linear_q5_0_q8_0", "q4_0": "linear_q4_0_q8_0"}
FORMATS = sorted(MAP_IDS)
VARIANTS = [(fmt, v) for fmt in FORMATS for v in map_variants(MAP_IDS[fmt])]

# (name, M, N, number of 32-blocks per row, weight d scale, activation d scale)
SHAPES = [
    ("one_block", 1, 1, 1, 0.01, 0.05),
    ("odd_blocks", 1, 7, 3, 0.01, 0.05),
    ("decode_20_blocks", 1, 13, 20, 0.02, 0.1),
    ("tail_after_8", 3, 9, 11, 0.01, 0.05),
    ("prefill_rows", 5, 6, 16, 0.01, 0.02),
    ("large_magnitudes", 2, 5, 9, 2000.0, 3000.0),
    ("tails_2_5_6_7", 1, 5, 10, 0.01, 0.05),
    ("tail_5_prefill", 6, 5, 13, 0.01, 0.05),
    ("tail_6", 4, 3, 14, 0.01, 0.05),
    ("tail_7", 9, 4, 15, 0.01, 0.05),
]


def _make(fmt: str, m: int, n: int, nb: int, wscale: float, xscale: float, seed: int
          ) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    w = random_blocks(rng, fmt, (n, nb), dscale=wscale)
    x = random_blocks(rng, "q8_0", (m, nb), dscale=xscale, qmin=-127)
    return w, x


def _run(fn, w: np.ndarray, x: np.ndarray, m: int, n: int, nb: int, nth: int) -> np.ndarray:
    y, check = guarded((m, n), np.float32)
    for ith in range(nth):
        fn(ptr(y), ptr(w), ptr(x), m, n, nb * 32, ith, nth)
        check()
    return y.copy()


@pytest.mark.parametrize("fmt,variant", VARIANTS, ids=[f"{f}-{v}" for f, v in VARIANTS])
def test_linear_q32_variants_match_ref(fmt: str, variant: str) -> None:
    map_id = MAP_IDS[fmt]
    skip_unless_runnable(map_id, variant)
    lib, spec = load_map_library(map_id)
    ref = bind(lib, spec, "ref")
    fn = bind(lib, spec, variant)
    for i, (name, m, n, nb, ws, xs) in enumerate(SHAPES):
        w, x = _make(fmt, m, n, nb, ws, xs, seed=100 + i)
        if name == "odd_blocks":
            x["qs"][0, 1] = 0  # a block of zero activations
        expected = _run(ref, w, x, m, n, nb, 1)
        for nth in (1, 2, 3):
            got = _run(fn, w, x, m, n, nb, nth)
            assert_close_or_equal(expected, got, map_id=map_id, variant=variant,
                                  context=f"{name} M={m} N={n} K={nb * 32} nth={nth}")


@pytest.mark.parametrize("fmt,variant", [fv for fv in VARIANTS if fv[1] != "ref"],
                         ids=[f"{f}-{v}" for f, v in VARIANTS if v != "ref"])
def test_linear_q32_simd_larger_shapes_match_ref(fmt: str, variant: str) -> None:
    map_id = MAP_IDS[fmt]
    skip_unless_runnable(map_id, variant)
    lib, spec = load_map_library(map_id)
    ref, fn = bind(lib, spec, "ref"), bind(lib, spec, variant)
    for m, n, nb in ((1, 259, 20), (17, 37, 64)):
        w, x = _make(fmt, m, n, nb, 0.01, 0.05, seed=m * 1000 + n)
        assert_close_or_equal(_run(ref, w, x, m, n, nb, 1), _run(fn, w, x, m, n, nb, 2),
                              map_id=map_id, variant=variant, context=f"M={m} N={n} K={nb * 32} nth=2")


@pytest.mark.parametrize("fmt", FORMATS)
def test_linear_q32_ref_matches_numpy(fmt: str) -> None:
    map_id = MAP_IDS[fmt]
    lib, spec = load_map_library(map_id)
    ref = bind(lib, spec, "ref")
    for i, (name, m, n, nb, ws, xs) in enumerate(SHAPES[:5]):
        w, x = _make(fmt, m, n, nb, ws, xs, seed=200 + i)
        expected = linear_q32_numpy(w, fmt, x)
        assert_close_or_equal(expected, _run(ref, w, x, m, n, nb, 2), map_id=map_id, variant="ref",
                              context=f"numpy oracle, {name}")


def test_linear_q32_quantized_activations_match_gguf_dequantize() -> None:
    """Sanity: the ref of q8_0 x q8_0 is close to a float64 product of gguf-dequantized operands."""
    import gguf

    map_id = "linear_q8_0_q8_0"
    lib, spec = load_map_library(map_id)
    ref = bind(lib, spec, "ref")
    rng = np.random.default_rng(7)
    wf = rng.standard_normal((24, 640)).astype(np.float32)
    xf = rng.standard_normal((3, 640)).astype(np.float32)
    wq = gguf.quants.quantize(wf, gguf.GGMLQuantizationType.Q8_0)
    xq = gguf.quants.quantize(xf, gguf.GGMLQuantizationType.Q8_0)
    wd = gguf.quants.dequantize(wq, gguf.GGMLQuantizationType.Q8_0).astype(np.float64)
    xd = gguf.quants.dequantize(xq, gguf.GGMLQuantizationType.Q8_0).astype(np.float64)
    y, check = guarded((3, 24), np.float32)
    ref(ptr(y), ptr(np.ascontiguousarray(wq)), ptr(np.ascontiguousarray(xq)), 3, 24, 640, 0, 1)
    check()
    assert_close_or_equal(xd @ wd.T, y, map_id=map_id, variant="ref", comparison={"rtol": 1e-5, "atol": 1e-4},
                          context="vs float64 product of gguf-dequantized operands")
