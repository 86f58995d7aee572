"""Differential tests for rmsnorm_f32: every variant bit-exact with ref (any nth, in place too), ref equal to NumPy.

The NumPy oracle restates the contract independently: x*x rounded to f32, f64 partial sums by index
mod 16 folded pairwise, mean rounded to f32, s = 1/sqrt(mean + eps) in f32, y = (x*s)*w.
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
from nonlinear_fixtures import LLAMA_SHA256, det_f32, sha256_of

MAP_ID = "rmsnorm_f32"
EPS = np.float32(1e-6)


def rmsnorm_numpy(x: np.ndarray, w: np.ndarray, eps: np.float32) -> np.ndarray:
    """The contract in NumPy: [M, N] f32 -> [M, N] f32."""
    m, n = x.shape
    with np.errstate(over="ignore"):
        sq = (x * x).astype(np.float64)
    pad = (-n) % 16
    part = np.concatenate([sq, np.zeros((m, pad))], axis=1).reshape(m, -1, 16)
    acc = np.zeros((m, 16))
    for blk in range(part.shape[1]):
        acc = acc + part[:, blk, :]
    for s in (8, 4, 2, 1):
        acc = acc[:, :s] + acc[:, s:2 * s]
    mean = (acc[:, 0] / n).astype(np.float32)
    with np.errstate(divide="ignore"):
        scale = (np.float32(1.0) / np.sqrt(mean + eps)).astype(np.float32)
    return ((x * scale[:, None]).astype(np.float32) * w).astype(np.float32)


def _cases() -> list[tuple[str, np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(7)
    out = []
    for name, (m, n) in {"one_row_640": (1, 640), "rows_5x640": (5, 640), "odd_3x37": (3, 37), "n1": (2, 1),
                         "n16": (4, 16), "rows_13x1000": (13, 1000)}.items():
        x = rng.standard_normal((m, n)).astype(np.float32)
        w = rng.standard_normal(n).astype(np.float32)
        out.append((name, x, w))
    x = rng.standard_normal((3, 640)).astype(np.float32)
    x[0] = 0.0
    x[1] *= 1e18
    x[2] *= 1e-20
    out.append(("zeros_large_tiny", x, rng.standard_normal(640).astype(np.float32)))
    return out


CASES = _cases()


@pytest.fixture(scope="module")
def lib_and_map():
    return load_map_library(MAP_ID)


def _run(fn, x: np.ndarray, w: np.ndarray, nth: int, in_place: bool = False) -> np.ndarray:
    m, n = x.shape
    y, check = guarded((m, n), np.float32)
    if in_place:
        y[...] = x
        src = y
    else:
        src = np.ascontiguousarray(x)
    for ith in range(nth):
        fn(ptr(y), ptr(src), ptr(w), m, n, EPS, ith, nth)
        check()
    return y.copy()


@pytest.mark.parametrize("variant", map_variants(MAP_ID, ref=False))
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_rmsnorm_variants_match_ref(lib_and_map, variant, case):
    lib, spec = lib_and_map
    skip_unless_runnable(MAP_ID, variant)
    name, x, w = case
    expected = _run(bind(lib, spec, "ref"), x, w, 1)
    fn = bind(lib, spec, variant)
    for nth in (1, 2, 3):
        got = _run(fn, x, w, nth)
        assert_close_or_equal(expected, got, map_id=MAP_ID, variant=variant, context=f"{name} nth={nth}")
    got = _run(fn, x, w, 2, in_place=True)
    assert_close_or_equal(expected, got, map_id=MAP_ID, variant=variant, context=f"{name} in place")


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_rmsnorm_ref_matches_numpy(lib_and_map, case):
    lib, spec = lib_and_map
    name, x, w = case
    got = _run(bind(lib, spec, "ref"), x, w, 3)
    assert_close_or_equal(rmsnorm_numpy(x, w, EPS), got, map_id=MAP_ID, variant="ref", context=f"{name} vs numpy")


@pytest.mark.parametrize("variant", map_variants(MAP_ID))
def test_rmsnorm_matches_llama_cpp(lib_and_map, variant):
    lib, spec = lib_and_map
    skip_unless_runnable(MAP_ID, variant)
    x = det_f32(640 * 3, 1, -3, 3).reshape(3, 640)
    w = det_f32(640, 2, 0.5, 1.5)
    got = _run(bind(lib, spec, variant), x, w, 2)
    assert sha256_of(got) == LLAMA_SHA256["rmsnorm_3x640"], f"{MAP_ID} [{variant}] differs from ggml rms_norm+mul"


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(m=st.integers(1, 9), n=st.integers(1, 3000), exp=st.integers(-30, 30), nth=st.integers(1, 4),
       seed=st.integers(0, 2**31))
def test_rmsnorm_random_shapes_property(lib_and_map, m, n, exp, nth, seed):
    """Random shapes and magnitudes: ref equals NumPy, every runnable variant equals ref bit for bit."""
    lib, spec = lib_and_map
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((m, n)) * 10.0 ** exp).astype(np.float32)
    w = rng.standard_normal(n).astype(np.float32)
    ref = _run(bind(lib, spec, "ref"), x, w, nth)
    assert_close_or_equal(rmsnorm_numpy(x, w, EPS), ref, map_id=MAP_ID, variant="ref", context=f"{m}x{n} e{exp}")
    for variant in runnable_variants(MAP_ID, ref=False):
        got = _run(bind(lib, spec, variant), x, w, nth)
        assert_close_or_equal(ref, got, map_id=MAP_ID, variant=variant, context=f"{m}x{n} e{exp} nth={nth}")
