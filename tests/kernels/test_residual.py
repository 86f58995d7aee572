"""Differential tests for residual_add_f32 and residual_save_copy: every variant byte-identical with ref and NumPy.

residual_add is one f32 add per element (NumPy float32 addition is the oracle); residual_save is a
byte copy (NaN payloads and -0.0 preserved). Checked for nth = 1, 2, 3 with guard bytes, in place for add.
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

SHAPES = {"decode_1x640": (1, 640), "one_elem": (1, 1), "odd_3x37": (3, 37), "prefill_17x640": (17, 640)}


def _inputs(m: int, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, n)).astype(np.float32) * np.float32(1e3)
    b = rng.standard_normal((m, n)).astype(np.float32)
    flat = a.reshape(-1)
    flat[:: 7] = -0.0
    flat[1:: 11] = np.float32(3e38)
    b.reshape(-1)[1:: 11] = np.float32(3e38)  # overflow to inf
    nan_bits = np.array([0x7FC01234], dtype=np.uint32).view(np.float32)[0]
    flat[2:: 13] = nan_bits
    return a, b


@pytest.mark.parametrize("variant", map_variants("residual_add_f32"))
@pytest.mark.parametrize("shape", list(SHAPES.values()), ids=list(SHAPES))
def test_residual_add_variants_match_ref(variant, shape):
    lib, spec = load_map_library("residual_add_f32")
    skip_unless_runnable("residual_add_f32", variant)
    m, n = shape
    a, b = _inputs(m, n, m * 1000 + n)
    with np.errstate(over="ignore", invalid="ignore"):
        want = (a + b).astype(np.float32)
    fn = bind(lib, spec, variant)
    for nth in (1, 2, 3):
        y, check = guarded((m, n), np.float32)
        for ith in range(nth):
            fn(ptr(y), ptr(a), ptr(b), m, n, ith, nth)
            check()
        assert_close_or_equal(want, y, map_id="residual_add_f32", variant=variant, context=f"{shape} nth={nth}")
    y, check = guarded((m, n), np.float32)
    y[...] = a
    for ith in range(2):
        fn(ptr(y), ptr(y), ptr(b), m, n, ith, 2)
        check()
    assert_close_or_equal(want, y, map_id="residual_add_f32", variant=variant, context=f"{shape} in place")


@pytest.mark.parametrize("variant", map_variants("residual_save_copy"))
@pytest.mark.parametrize("shape", list(SHAPES.values()), ids=list(SHAPES))
def test_residual_save_variants_match_ref(variant, shape):
    lib, spec = load_map_library("residual_save_copy")
    skip_unless_runnable("residual_save_copy", variant)
    m, n = shape
    x, _ = _inputs(m, n, m * 77 + n)
    fn = bind(lib, spec, variant)
    for nth in (1, 2, 3):
        y, check = guarded((m, n), np.float32)
        for ith in range(nth):
            fn(ptr(y), ptr(x), m, n, ith, nth)
            check()
        assert_close_or_equal(x, y, map_id="residual_save_copy", variant=variant, context=f"{shape} nth={nth}")
