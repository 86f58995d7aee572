"""Differential tests for quantize_act_q8_k: every variant byte-identical to ref, and ref equal to NumPy.

The NumPy oracle restates llama.cpp's quantize_row_q8_K_ref rounding (first signed max, iscale =
-127/max in f32, round half to even, clamp at 127, bsums, d = 1/iscale) independently of the C code.
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

MAP_ID = "quantize_act_q8_k"
QK_K = 256
Q8_K_DTYPE = np.dtype([("d", "<f4"), ("qs", "i1", (QK_K,)), ("bsums", "<i2", (QK_K // 16,))])
assert Q8_K_DTYPE.itemsize == 292


def quantize_q8_k_numpy(x: np.ndarray) -> np.ndarray:
    """x f32 [M, K] -> structured q8_k blocks [M, K/256] following the contract."""
    m, k = x.shape
    blocks = x.reshape(m * (k // QK_K), QK_K).astype(np.float32)
    out = np.zeros(blocks.shape[0], dtype=Q8_K_DTYPE)
    first = np.argmax(np.abs(blocks), axis=1)
    signed_max = blocks[np.arange(blocks.shape[0]), first]
    nonzero = signed_max != 0
    with np.errstate(divide="ignore"):
        iscale = np.where(nonzero, np.float32(-127.0) / signed_max, np.float32(0)).astype(np.float32)
    q = np.minimum(np.rint(blocks * iscale[:, None]), 127).astype(np.int8)
    q[~nonzero] = 0
    out["qs"] = q
    out["bsums"] = q.reshape(-1, QK_K // 16, 16).astype(np.int32).sum(axis=2).astype(np.int16)
    with np.errstate(divide="ignore"):
        out["d"] = np.where(nonzero, np.float32(1.0) / iscale, np.float32(0))
    return out.reshape(m, k // QK_K)


def _cases() -> list[tuple[str, np.ndarray]]:
    rng = np.random.default_rng(1234)
    cases = []
    cases.append(("one_block", rng.standard_normal((1, 256)).astype(np.float32)))
    cases.append(("odd_blocks_m1", rng.standard_normal((1, 3 * 256)).astype(np.float32)))
    cases.append(("rows_5x768", (rng.standard_normal((5, 768)) * 3).astype(np.float32)))
    cases.append(("rows_17x2048", rng.uniform(-1, 1, (17, 2048)).astype(np.float32)))
    zeros = rng.standard_normal((3, 512)).astype(np.float32)
    zeros[1, :] = 0.0
    zeros[2, 256:] = -0.0
    cases.append(("zero_blocks", zeros))
    big = rng.standard_normal((2, 512))
    big[0] *= 1e30
    big[1] *= 1e-30  # tiny but iscale stays finite (contract: a nonzero block needs |max| >= 2^-120)
    big = big.astype(np.float32)
    cases.append(("large_and_tiny", big))
    ties = np.zeros((2, 256), dtype=np.float32)
    ties[0, :] = np.arange(256, dtype=np.float32) - 127.0   # |max| = 128 at index 255 (positive)
    ties[1, 10], ties[1, 20] = -5.0, 5.0                      # equal |max|, first one is negative
    ties[1, 30:40] = 2.5 * 5.0 / 127.0
    cases.append(("ties", ties))
    halves = np.zeros((1, 256), dtype=np.float32)
    halves[0, 0] = -127.0                                     # iscale = 1 exactly
    halves[0, 1:] = np.arange(-127, 128, dtype=np.float32) + 0.5   # every k + 0.5 tie, -126.5..127.5
    halves[0, 255] = 126.5
    cases.append(("half_way_rounding", halves))
    return cases


CASES = _cases()


@pytest.fixture(scope="module")
def lib_and_map():
    return load_map_library(MAP_ID)


def _run(fn, x: np.ndarray, nth: int) -> np.ndarray:
    m, k = x.shape
    y, check = guarded(m * (k // QK_K) * Q8_K_DTYPE.itemsize, np.uint8)
    xc = np.ascontiguousarray(x, dtype=np.float32)
    for ith in range(nth):
        fn(ptr(y), ptr(xc), m, k, ith, nth)
        check()
    return y.view(Q8_K_DTYPE).reshape(m, k // QK_K).copy()


def _bytes(blocks: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(blocks).view(np.uint8).reshape(-1)


@pytest.mark.parametrize("name,x", CASES, ids=[c[0] for c in CASES])
def test_quantize_q8_k_ref_matches_numpy(lib_and_map, name, x):
    lib, spec = lib_and_map
    got = _run(bind(lib, spec, "ref"), x, 1)
    want = quantize_q8_k_numpy(x)
    assert_close_or_equal(_bytes(want), _bytes(got), map_id=MAP_ID, variant="ref",
                          context=f"case={name} shape={x.shape} vs numpy")


@pytest.mark.parametrize("variant", map_variants(MAP_ID, ref=False))
@pytest.mark.parametrize("nth", [1, 2, 3])
def test_quantize_q8_k_variants_match_ref(lib_and_map, variant, nth):
    lib, spec = lib_and_map
    skip_unless_runnable(MAP_ID, variant)
    ref = bind(lib, spec, "ref")
    fn = bind(lib, spec, variant)
    for name, x in CASES:
        want = _run(ref, x, 1)
        got = _run(fn, x, nth)
        assert_close_or_equal(_bytes(want), _bytes(got), map_id=MAP_ID, variant=variant,
                              context=f"case={name} shape={x.shape} nth={nth}")


def test_quantize_q8_k_ref_is_partition_invariant(lib_and_map):
    lib, spec = lib_and_map
    ref = bind(lib, spec, "ref")
    for name, x in CASES:
        want = _run(ref, x, 1)
        for nth in (2, 3, 5):
            got = _run(ref, x, nth)
            assert_close_or_equal(_bytes(want), _bytes(got), map_id=MAP_ID, variant="ref",
                                  context=f"case={name} nth={nth}")
