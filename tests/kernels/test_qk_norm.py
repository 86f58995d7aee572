"""Differential tests for qk_norm_f32: every variant bit-exact with ref (any nth, in place), ref equal to NumPy.

The oracle is the rmsnorm contract applied to each head's D values (test_rmsnorm.rmsnorm_numpy on the
[M*H, D] view) with the weight shared by all heads.
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
from test_rmsnorm import rmsnorm_numpy

MAP_ID = "qk_norm_f32"
EPS = np.float32(1e-6)


def _cases() -> list[tuple[str, np.ndarray, np.ndarray, int, int]]:
    rng = np.random.default_rng(11)
    out = []
    for name, (m, h, d) in {"decode_q_4x256": (1, 4, 256), "decode_k_1x256": (1, 1, 256),
                            "prefill_7x4x256": (7, 4, 256), "odd_3x3x20": (3, 3, 20), "d1": (2, 5, 1)}.items():
        x = rng.standard_normal((m, h * d)).astype(np.float32)
        out.append((name, x, rng.standard_normal(d).astype(np.float32), h, d))
    x = rng.standard_normal((2, 3 * 64)).astype(np.float32)
    x[0, :64] = 0.0
    x[1, 64:128] *= 1e15
    out.append(("zero_and_large_heads", x, rng.standard_normal(64).astype(np.float32), 3, 64))
    return out


CASES = _cases()


@pytest.fixture(scope="module")
def lib_and_map():
    return load_map_library(MAP_ID)


def _run(fn, x, w, h, d, nth, in_place=False):
    m = x.shape[0]
    y, check = guarded(x.shape, np.float32)
    if in_place:
        y[...] = x
        src = y
    else:
        src = np.ascontiguousarray(x)
    for ith in range(nth):
        fn(ptr(y), ptr(src), ptr(w), m, h, d, EPS, ith, nth)
        check()
    return y.copy()


@pytest.mark.parametrize("variant", map_variants(MAP_ID, ref=False))
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_qk_norm_variants_match_ref(lib_and_map, variant, case):
    lib, spec = lib_and_map
    skip_unless_runnable(MAP_ID, variant)
    name, x, w, h, d = case
    expected = _run(bind(lib, spec, "ref"), x, w, h, d, 1)
    fn = bind(lib, spec, variant)
    for nth in (1, 2, 3):
        got = _run(fn, x, w, h, d, nth)
        assert_close_or_equal(expected, got, map_id=MAP_ID, variant=variant, context=f"{name} nth={nth}")
    got = _run(fn, x, w, h, d, 2, in_place=True)
    assert_close_or_equal(expected, got, map_id=MAP_ID, variant=variant, context=f"{name} in place")


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_qk_norm_ref_matches_numpy(lib_and_map, case):
    lib, spec = lib_and_map
    name, x, w, h, d = case
    got = _run(bind(lib, spec, "ref"), x, w, h, d, 2)
    want = rmsnorm_numpy(x.reshape(-1, d), w, EPS).reshape(x.shape)
    assert_close_or_equal(want, got, map_id=MAP_ID, variant="ref", context=f"{name} vs numpy")
