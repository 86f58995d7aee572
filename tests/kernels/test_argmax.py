"""Tests for argmax_f32: every variant returns ref's index; ref equals a NumPy restatement of the contract.

Contract: the lowest index of the largest non-NaN value (+0.0 == -0.0); an all-NaN row gives 0.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
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

MAP_ID = "argmax_f32"


def argmax_numpy(x: np.ndarray) -> np.ndarray:
    out = np.zeros(x.shape[0], np.int32)
    for r, row in enumerate(x):
        ok = ~np.isnan(row)
        if ok.any():
            best = row[ok].max()
            out[r] = int(np.flatnonzero(row == best)[0])
    return out


def _cases() -> list[tuple[str, np.ndarray]]:
    rng = np.random.default_rng(5)
    out = [("lm_head_1x262144", rng.standard_normal((1, 262144)).astype(np.float32)),
           ("rows_7x1001", rng.standard_normal((7, 1001)).astype(np.float32)),
           ("n1", rng.standard_normal((3, 1)).astype(np.float32))]
    x = rng.standard_normal((8, 100)).astype(np.float32)
    x[0, [5, 40, 77]] = 9.0                       # ties -> 5
    x[1, :] = np.nan                              # all NaN -> 0
    x[2, :] = -np.inf                             # all -inf -> 0
    x[2, 60] = np.nan
    x[3, ::2] = np.nan
    x[3, 51] = 50.0                               # NaNs ignored -> 51
    x[4, :] = 0.0
    x[4, :10] = -0.0                              # +0 == -0 -> 0
    x[5, :] = np.nan
    x[5, 99] = -np.inf                            # only non-NaN is -inf -> 99
    x[6, 99] = np.inf
    x[7, 16] = 1e30
    x[7, 15] = 1e30                               # tie across a vector boundary -> 15
    out.append(("edges", x))
    return out


CASES = _cases()


@pytest.fixture(scope="module")
def lib_and_map():
    return load_map_library(MAP_ID)


def _run(fn, x, nth):
    m, n = x.shape
    y, check = guarded(m, np.int32)
    for ith in range(nth):
        fn(ptr(y), ptr(x), m, n, ith, nth)
        check()
    return y.copy()


@pytest.mark.parametrize("variant", map_variants(MAP_ID, ref=False))
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_argmax_variants_match_ref(lib_and_map, variant, case):
    lib, spec = lib_and_map
    skip_unless_runnable(MAP_ID, variant)
    name, x = case
    expected = _run(bind(lib, spec, "ref"), x, 1)
    for nth in (1, 2, 3):
        got = _run(bind(lib, spec, variant), x, nth)
        assert_close_or_equal(expected, got, map_id=MAP_ID, variant=variant, context=f"{name} nth={nth}")


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_argmax_ref_matches_numpy(lib_and_map, case):
    lib, spec = lib_and_map
    name, x = case
    got = _run(bind(lib, spec, "ref"), x, 2)
    assert_close_or_equal(argmax_numpy(x), got, map_id=MAP_ID, variant="ref", context=f"{name} vs numpy")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(m=st.integers(1, 6), n=st.integers(1, 2000), levels=st.integers(1, 5), nan_frac=st.sampled_from([0.0, 0.1, 0.9]),
       nth=st.integers(1, 4), seed=st.integers(0, 2**31))
def test_argmax_random_ties_property(lib_and_map, m, n, levels, nan_frac, nth, seed):
    """Few distinct values (many ties) and NaNs: every variant returns the NumPy contract's index."""
    lib, spec = lib_and_map
    rng = np.random.default_rng(seed)
    x = rng.integers(0, levels, (m, n)).astype(np.float32)
    x[rng.random((m, n)) < nan_frac] = np.nan
    want = argmax_numpy(x)
    for variant in runnable_variants(MAP_ID):
        got = _run(bind(lib, spec, variant), x, nth)
        assert_close_or_equal(want, got, map_id=MAP_ID, variant=variant, context=f"{m}x{n} nth={nth}")
