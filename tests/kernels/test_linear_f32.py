"""Differential tests for the float-activation linear kernels (linear_f32_f32, linear_q8_0_f32).

Both contracts fix the float order (16 partials fed k mod 16 with fmaf, then a fixed tree), so every
variant must be byte-identical to its ref for every (ith, nth); the ref must equal an exactly rounded
NumPy statement of the same order, and stay close to a float64 product as a sanity check.
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
from q32_oracle import linear_float_numpy, random_blocks

MAP_IDS = {"f32": "linear_f32_f32", "q8_0": "linear_q8_0_f32"}
VARIANTS = [(fmt, v) for fmt in sorted(MAP_IDS) for v in map_variants(MAP_IDS[fmt])]

# (name, M, N, K); K for q8_0 weights is rounded up to a multiple of 32
SHAPES = [
    ("one_block", 1, 1, 32),
    ("odd_k_tail", 1, 7, 37),
    ("decode", 1, 13, 640),
    ("prefill_rows", 5, 9, 96),
    ("tiny_k", 3, 6, 3),
]


def _weights(fmt: str, n: int, k: int, rng: np.random.Generator, big: bool) -> tuple[np.ndarray, np.ndarray]:
    """(raw weights to pass to C, their exact f32 values [N, K])."""
    if fmt == "f32":
        w = (rng.standard_normal((n, k)) * (1e3 if big else 1.0)).astype(np.float32)
        return w, w
    blocks = random_blocks(rng, "q8_0", (n, k // 32), dscale=10.0 if big else 0.02)
    deq = (blocks["qs"].astype(np.float32) * blocks["d"].astype(np.float32)[..., None]).reshape(n, k)
    return blocks, deq


def _k(fmt: str, k: int) -> int:
    return k if fmt == "f32" else max(32, (k + 31) // 32 * 32)


def _run(fn, w: np.ndarray, x: np.ndarray, n: int, nth: int) -> np.ndarray:
    m, k = x.shape
    y, check = guarded((m, n), np.float32)
    for ith in range(nth):
        fn(ptr(y), ptr(w), ptr(x), m, n, k, ith, nth)
        check()
    return y.copy()


@pytest.mark.parametrize("fmt,variant", VARIANTS, ids=[f"{f}-{v}" for f, v in VARIANTS])
def test_linear_float_variants_match_ref(fmt: str, variant: str) -> None:
    map_id = MAP_IDS[fmt]
    skip_unless_runnable(map_id, variant)
    lib, spec = load_map_library(map_id)
    ref = bind(lib, spec, "ref")
    fn = bind(lib, spec, variant)
    for i, (name, m, n, k) in enumerate([*SHAPES, ("large_magnitudes", 2, 5, 64)]):
        k = _k(fmt, k)
        rng = np.random.default_rng(300 + i)
        w, _ = _weights(fmt, n, k, rng, big=name == "large_magnitudes")
        x = rng.standard_normal((m, k)).astype(np.float32)
        if name == "prefill_rows":
            x[1] = 0.0
        expected = _run(ref, w, x, n, 1)
        for nth in (1, 2, 3):
            assert_close_or_equal(expected, _run(fn, w, x, n, nth), map_id=map_id, variant=variant,
                                  context=f"{name} M={m} N={n} K={k} nth={nth}")


@pytest.mark.parametrize("fmt", sorted(MAP_IDS))
def test_linear_float_ref_matches_numpy(fmt: str) -> None:
    map_id = MAP_IDS[fmt]
    lib, spec = load_map_library(map_id)
    ref = bind(lib, spec, "ref")
    for i, (name, m, n, k) in enumerate(SHAPES):
        k = _k(fmt, k)
        if m * n * k > 20000:
            continue  # the exact-rounding oracle is slow; the decode shape is covered by the variants test
        rng = np.random.default_rng(400 + i)
        w, wf = _weights(fmt, n, k, rng, big=False)
        x = rng.standard_normal((m, k)).astype(np.float32)
        got = _run(ref, w, x, n, 2)
        assert_close_or_equal(linear_float_numpy(wf, x), got, map_id=map_id, variant="ref",
                              context=f"numpy oracle, {name}")
        assert_close_or_equal(x.astype(np.float64) @ wf.T.astype(np.float64), got, map_id=map_id, variant="ref",
                              comparison={"rtol": 1e-5, "atol": 1e-5}, context=f"float64 sanity, {name}")
