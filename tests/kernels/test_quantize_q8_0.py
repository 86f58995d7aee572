"""Differential tests for quantize_act_q8_0: every variant byte-identical to ref, ref equal to gguf-py.

gguf.quants.quantize(Q8_0) restates llama.cpp's quantize_row_q8_0_ref (d = amax/127, id = 1/d,
roundf halves away from zero, f16 scale), so it is the independent oracle for the ref.
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

import gguf

MAP_ID = "quantize_act_q8_0"


def _cases() -> list[tuple[str, np.ndarray]]:
    rng = np.random.default_rng(4321)
    cases = [
        ("one_block", rng.standard_normal((1, 32)).astype(np.float32)),
        ("odd_blocks_m1", rng.standard_normal((1, 7 * 32)).astype(np.float32)),
        ("decode_640", (rng.standard_normal((1, 640)) * 4).astype(np.float32)),
        ("rows_5x2048", rng.uniform(-3, 3, (5, 2048)).astype(np.float32)),
    ]
    zeros = rng.standard_normal((3, 96)).astype(np.float32)
    zeros[1, :] = 0.0
    zeros[2, 32:64] = -0.0
    cases.append(("zero_blocks", zeros))
    big = rng.standard_normal((2, 64))
    big[0] *= 1e30
    big[1] *= 1e-3
    cases.append(("large_and_small", big.astype(np.float32)))
    halves = np.zeros((2, 32), dtype=np.float32)
    halves[0, 0] = 127.0                       # id = 1: every x*id is exact
    halves[0, 1:] = np.arange(31, dtype=np.float32) * 0.5 - 7.5   # many exact .5 ties
    halves[1, 0] = -254.0                      # id = 0.5
    halves[1, 1:] = np.arange(31, dtype=np.float32) - 15.0        # odd values give .5 ties
    cases.append(("round_half_away", halves))
    return cases


def _run(fn, x: np.ndarray, nth: int) -> np.ndarray:
    m, k = x.shape
    y, check = guarded((m * (k // 32) * 34,), np.uint8)
    for ith in range(nth):
        fn(ptr(y), ptr(x), m, k, ith, nth)
        check()
    return y.copy()


@pytest.mark.parametrize("variant", map_variants(MAP_ID))
def test_quantize_q8_0_variants_match_ref(variant: str) -> None:
    skip_unless_runnable(MAP_ID, variant)
    lib, spec = load_map_library(MAP_ID)
    ref = bind(lib, spec, "ref")
    fn = bind(lib, spec, variant)
    for name, x in _cases():
        expected = _run(ref, x, 1)
        for nth in (1, 2, 3):
            assert_close_or_equal(expected, _run(fn, x, nth), map_id=MAP_ID, variant=variant,
                                  context=f"{name} shape={x.shape} nth={nth}")


@pytest.mark.parametrize("variant", map_variants(MAP_ID, ref=False))
def test_quantize_q8_0_simd_variant_runs_on_host(variant: str) -> None:
    skip_unless_runnable(MAP_ID, variant)
    lib, spec = load_map_library(MAP_ID)
    x = np.random.default_rng(5).standard_normal((3, 640)).astype(np.float32)
    assert_close_or_equal(_run(bind(lib, spec, "ref"), x, 1), _run(bind(lib, spec, variant), x, 2),
                          map_id=MAP_ID, variant=variant, context="3x640 nth=2")


def test_quantize_q8_0_ref_matches_gguf() -> None:
    lib, spec = load_map_library(MAP_ID)
    ref = bind(lib, spec, "ref")
    for name, x in _cases():
        with np.errstate(over="ignore"):  # the 1e30 block's scale overflows f16 in both implementations
            expected = np.ascontiguousarray(gguf.quants.quantize(x, gguf.GGMLQuantizationType.Q8_0)).reshape(-1)
        assert_close_or_equal(expected, _run(ref, x, 2), map_id=MAP_ID, variant="ref",
                              context=f"gguf.quants.quantize oracle, {name}")
