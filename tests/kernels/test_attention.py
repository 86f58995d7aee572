"""Tests for attention_f16kv and attention_f32kv: SIMD within the map's tolerance of ref, every SIMD variant (the
instantiations of attention/attention_online_body.h) byte-identical with the others, ref vs NumPy.

The NumPy oracle is float64 causal GQA softmax attention over the cache as stored (f16 widened
exactly), with llama.cpp's standard sliding window (key j visible from position p iff j <= p and,
when window > 0, p - j < window). Cache rows at or beyond pos + M are filled with NaN, so a kernel
that reads a key it must not see fails loudly.
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
    run_partitioned,
    runnable_variants,
    skip_unless_runnable,
)

KINDS = ("f16", "f32")
CASES = {
    # name: (M, Hq, Hkv, D, C, pos, window)
    "decode_gqa4_full": (1, 4, 1, 256, 300, 200, 0),
    "decode_gqa4_window": (1, 4, 1, 256, 300, 200, 64),
    "decode_pos0": (1, 4, 1, 256, 8, 0, 0),
    "window1": (3, 2, 2, 64, 40, 10, 1),
    "window_beyond_context": (2, 4, 1, 128, 100, 50, 512),
    "chunked_prefill_gqa4": (17, 4, 1, 256, 128, 40, 16),
    "prefill_from0_gqa1": (9, 3, 3, 80, 16, 0, 0),
    "gqa2_d16": (5, 4, 2, 16, 64, 33, 7),
    "long_decode_chunks": (1, 4, 1, 256, 2100, 2047, 0),
    "hq8_hkv2_d512": (3, 8, 2, 512, 50, 20, 0),
    "gqa8_window_33": (4, 8, 1, 32, 120, 90, 33),
}
FAST_NTH = (1, 2, 3)
SIMD = [(kind, v) for kind in KINDS for v in map_variants(f"attention_{kind}kv", ref=False)]


def attention_numpy(q, kc, vc, m_rows, hq, hkv, d, pos, scale, window):
    """float64 oracle: q [M, Hq*D], caches [Hkv, C, D] (already float) -> y [M, Hq*D]."""
    y = np.zeros((m_rows, hq, d))
    group = hq // hkv
    for m in range(m_rows):
        p = pos + m
        j0 = max(0, p - window + 1) if window > 0 else 0
        for h in range(hq):
            k = kc[h // group, j0:p + 1].astype(np.float64)
            v = vc[h // group, j0:p + 1].astype(np.float64)
            s = scale * (k @ q[m, h * d:(h + 1) * d].astype(np.float64))
            w = np.exp(s - s.max())
            y[m, h] = (w / w.sum()) @ v
    return y.reshape(m_rows, hq * d)


def _inputs(kind, m, hq, hkv, d, c, pos):
    rng = np.random.default_rng(m * 7919 + hq * 31 + d + pos)
    q = rng.standard_normal((m, hq * d)).astype(np.float32)
    k = rng.standard_normal((hkv, c, d)).astype(np.float32)
    v = rng.standard_normal((hkv, c, d)).astype(np.float32)
    k[:, 0, :] *= 3.0  # a dominant early key: exercises the running-max rescale
    dtype = np.float16 if kind == "f16" else np.float32
    kc = k.astype(dtype)
    vc = v.astype(dtype)
    kc[:, pos + m:, :] = np.nan
    vc[:, pos + m:, :] = np.nan
    return q, kc, vc


def _run(fn, q, kc, vc, dims, scale, nth):
    m, hq, hkv, d, c, pos, window = dims
    y, check = guarded((m, hq * d), np.float32)
    for ith in range(nth):
        fn(ptr(y), ptr(q), ptr(kc), ptr(vc), m, hq, hkv, d, c, pos, scale, window, ith, nth)
        check()
    return y.copy()


@pytest.fixture(scope="module", params=KINDS)
def kind_lib(request):
    lib, spec = load_map_library(f"attention_{request.param}kv")
    return request.param, lib, spec


def _simd(kind):
    return runnable_variants(f"attention_{kind}kv", ref=False)


@pytest.mark.parametrize("kind,variant", SIMD, ids=[f"{k}-{v}" for k, v in SIMD])
@pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
def test_attention_variants_match_ref(kind, variant, case):
    skip_unless_runnable(f"attention_{kind}kv", variant)
    lib, spec = load_map_library(f"attention_{kind}kv")
    dims = CASES[case]
    m, hq, hkv, d, c, pos, _ = dims
    q, kc, vc = _inputs(kind, m, hq, hkv, d, c, pos)
    scale = float(1.0 / np.sqrt(d))
    expected = _run(bind(lib, spec, "ref"), q, kc, vc, dims, scale, 1)
    fn = bind(lib, spec, variant)
    first = _run(fn, q, kc, vc, dims, scale, 1)
    assert_close_or_equal(expected, first, map_id=spec["id"], variant=variant,
                          comparison=spec["numerics"]["comparison"], context=case)
    for nth in FAST_NTH[1:]:
        got = _run(fn, q, kc, vc, dims, scale, nth)
        assert_close_or_equal(first, got, map_id=spec["id"], variant=variant, context=f"{case} nth={nth} vs nth=1")


@pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
def test_attention_simd_variants_identical(kind_lib, case):
    """The instantiations of one body give the same bytes (different vector widths, nth 1 vs 3)."""
    kind, lib, spec = kind_lib
    simd = _simd(kind)
    if len(simd) < 2:
        pytest.skip(f"{spec['id']}: fewer than two SIMD variants run here ({simd})")
    dims = CASES[case]
    m, hq, hkv, d, c, pos, _ = dims
    q, kc, vc = _inputs(kind, m, hq, hkv, d, c, pos)
    a = _run(bind(lib, spec, simd[0]), q, kc, vc, dims, 0.0625, 1)
    for variant in simd[1:]:
        b = _run(bind(lib, spec, variant), q, kc, vc, dims, 0.0625, 3)
        assert_close_or_equal(a, b, map_id=spec["id"], variant=f"{variant} vs {simd[0]}", context=case)


@pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
def test_attention_ref_matches_numpy(kind_lib, case):
    kind, lib, spec = kind_lib
    dims = CASES[case]
    m, hq, hkv, d, c, pos, window = dims
    q, kc, vc = _inputs(kind, m, hq, hkv, d, c, pos)
    scale = float(1.0 / np.sqrt(d))
    got = _run(bind(lib, spec, "ref"), q, kc, vc, dims, scale, 2)
    want = attention_numpy(q, kc.astype(np.float64), vc.astype(np.float64), m, hq, hkv, d, pos, scale, window)
    assert_close_or_equal(want, got.astype(np.float64), map_id=spec["id"], variant="ref",
                          comparison={"rtol": 1e-4, "atol": 2e-5}, context=f"{case} vs float64")


def test_attention_window_masks_exactly(kind_lib):
    """A key just outside the window carries a huge value: any leak shows in the output."""
    kind, lib, spec = kind_lib
    m, hq, hkv, d, c, pos, window = 2, 1, 1, 32, 32, 9, 4
    q, kc, vc = _inputs(kind, m, hq, hkv, d, c, pos)
    kc[0, : pos - window + 1, :] = 0
    vc[0, : pos - window + 1, :] = 1000.0  # keys 0..5 are outside every row's window
    for variant in runnable_variants(spec["id"]):
        got = _run(bind(lib, spec, variant), q, kc, vc, (m, hq, hkv, d, c, pos, window), 0.5, 1)
        assert np.all(np.abs(got) < 10), f"{spec['id']} [{variant}]: a masked key leaked into the output"


@pytest.mark.parametrize("kind,variant", [(k, "ref") for k in KINDS] + SIMD,
                         ids=[f"{k}-ref" for k in KINDS] + [f"{k}-{v}" for k, v in SIMD])
def test_attention_concurrent_threads_match_sequential(kind, variant):
    """Two real threads (ctypes releases the GIL) give the bytes of the sequential partitioned run."""
    skip_unless_runnable(f"attention_{kind}kv", variant)
    lib, spec = load_map_library(f"attention_{kind}kv")
    dims = CASES["chunked_prefill_gqa4"]
    m, hq, hkv, d, c, pos, window = dims
    q, kc, vc = _inputs(kind, m, hq, hkv, d, c, pos)
    fn = bind(lib, spec, variant)
    expected = _run(fn, q, kc, vc, dims, 0.0625, 2)
    y, check = guarded((m, hq * d), np.float32)
    run_partitioned(fn, (ptr(y), ptr(q), ptr(kc), ptr(vc), m, hq, hkv, d, c, pos, 0.0625, window), 2, threaded=True)
    check()
    assert_close_or_equal(expected, y, map_id=spec["id"], variant=variant, context="threaded nth=2")


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(m=st.integers(1, 6), hkv=st.integers(1, 3), ratio=st.sampled_from([1, 2, 4]), d16=st.integers(1, 6),
       pos=st.integers(0, 90), window=st.sampled_from([0, 1, 2, 31, 32, 33, 200]), nth=st.integers(1, 4))
def test_attention_random_shapes_property(kind_lib, m, hkv, ratio, d16, pos, window, nth):
    """Random shapes: every runnable SIMD variant within tolerance of ref and byte-identical to the others, ref
    near float64."""
    kind, lib, spec = kind_lib
    hq, d = hkv * ratio, 16 * d16
    c = pos + m + 3
    dims = (m, hq, hkv, d, c, pos, window)
    q, kc, vc = _inputs(kind, m, hq, hkv, d, c, pos)
    ref = _run(bind(lib, spec, "ref"), q, kc, vc, dims, 0.125, nth)
    want = attention_numpy(q, kc.astype(np.float64), vc.astype(np.float64), m, hq, hkv, d, pos, 0.125, window)
    assert_close_or_equal(want, ref.astype(np.float64), map_id=spec["id"], variant="ref",
                          comparison={"rtol": 1e-4, "atol": 2e-5}, context=f"{dims} vs float64")
    simd = {}
    for variant in _simd(kind):
        simd[variant] = _run(bind(lib, spec, variant), q, kc, vc, dims, 0.125, nth)
        assert_close_or_equal(ref, simd[variant], map_id=spec["id"], variant=variant,
                              comparison=spec["numerics"]["comparison"], context=f"{dims} nth={nth}")
    names = list(simd)
    for variant in names[1:]:
        assert_close_or_equal(simd[names[0]], simd[variant], map_id=spec["id"], variant=f"{variant} vs {names[0]}",
                              context=str(dims))
