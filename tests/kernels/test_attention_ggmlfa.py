"""Tests for attention_f16kv_ggmlfa: every variant byte-identical with ref, ref equal to the NumPy emulation.

The oracle is tests/parity_fa/fa_emulation.py, the NumPy emulation of llama.cpp's CPU flash
attention that check_peer.py verifies against llama.cpp's own attention outputs. Cache rows at or
beyond pos + M are NaN, so a kernel that reads a key it must not see fails loudly.
"""

from __future__ import annotations

import ctypes
import os

import numpy as np
import pytest
from expf_sample import EXPF_SAMPLE  # the float bit ranges of the sampled check (tests/support)
from ggmlfa_cases import emulation as _emulation
from ggmlfa_cases import inputs as _inputs
from ggmlfa_cases import run as _run
from kernel_harness import (
    assert_close_or_equal,
    bind,
    host_can_run,
    load_map_library,
    map_variants,
    skip_unless_runnable,
)

MAP_ID = "attention_f16kv_ggmlfa"
CASES = {
    # name: (M, Hq, Hkv, D, C, pos, window, scale, data)
    "decode_gqa4_full": (1, 4, 1, 256, 300, 200, 0, 0.0625, "normal"),
    "decode_gqa4_window": (1, 4, 1, 256, 300, 200, 64, 0.0625, "normal"),
    "decode_pos0": (1, 4, 1, 256, 8, 0, 0, 0.0625, "normal"),
    "window1": (3, 2, 2, 64, 40, 10, 1, 0.125, "normal"),
    "prefill_gqa4_window": (17, 4, 1, 256, 64, 20, 16, 0.0625, "normal"),
    "d16_tail_only": (5, 4, 2, 16, 64, 33, 7, 0.25, "normal"),
    "d80_tail16": (4, 3, 3, 80, 16, 0, 0, 0.1118034, "normal"),
    "d112_tail48": (2, 2, 1, 112, 30, 9, 0, 0.0945, "normal"),
    "d512": (2, 8, 2, 512, 20, 10, 0, 0.0441941738, "normal"),
    "zeros_ties": (3, 4, 1, 64, 20, 5, 0, 0.125, "zeros"),
    "large_scores": (2, 4, 1, 128, 40, 30, 0, 1.0, "large"),
    "tiny_q_subnormal_f16": (2, 4, 1, 128, 40, 12, 0, 0.0625, "tiny"),
    "rising_max": (1, 2, 1, 64, 40, 31, 0, 0.5, "rising"),
    # the SIMD schedule: groups of <= 4 heads sharing a KV head, 32-key blocks, balanced partition
    "prefill_pos0_gqa4": (70, 4, 1, 256, 80, 0, 0, 0.0625, "normal"),
    "gqa8_two_groups": (5, 8, 1, 64, 100, 60, 0, 0.125, "normal"),
    "gqa3_hkv2": (4, 6, 2, 128, 90, 40, 0, 0.1, "normal"),
    "window_across_blocks": (9, 4, 1, 256, 200, 150, 45, 0.0625, "normal"),
    "d48_tail_blocks": (3, 4, 1, 48, 120, 100, 0, 0.2, "normal"),
    "rising_long": (2, 4, 1, 128, 120, 100, 0, 0.5, "rising"),
    "row_pairs_hkv2_window": (6, 8, 2, 128, 70, 50, 5, 0.09, "normal"),
    # row pairs of 3 heads (6 items) with D a multiple of 32, not of 64: the fused schedule must not take them
    "row_pairs_gqa3_d224": (4, 6, 2, 224, 40, 20, 0, 0.0668153, "normal"),
    "row_pairs_gqa3_d288": (4, 6, 2, 288, 40, 20, 0, 0.0589256, "normal"),
}
NTH = (1, 2, 3, 5)


@pytest.fixture(scope="module")
def lib_spec():
    return load_map_library(MAP_ID)


def _variant(spec, name):
    v = next(v for v in spec["variants"] if v["name"] == name)
    ok, why = host_can_run(v["requires"])
    if not ok:
        pytest.skip(f"{MAP_ID} [{name}]: host lacks {why}")
    return v


@pytest.mark.parametrize("variant", map_variants(MAP_ID, ref=False))
@pytest.mark.parametrize("case_name", sorted(CASES))
def test_attention_ggmlfa_variants_match_ref(lib_spec, variant, case_name):
    skip_unless_runnable(MAP_ID, variant)
    lib, spec = lib_spec
    _variant(spec, variant)
    case = CASES[case_name]
    q, kc, vc = _inputs(case)
    want = _run(bind(lib, spec, "ref"), q, kc, vc, case, 1)
    got = _run(bind(lib, spec, variant), q, kc, vc, case, 2)
    assert np.isfinite(want).all()
    assert_close_or_equal(want, got, map_id=MAP_ID, variant=variant, context=f"{case_name} nth=2")


@pytest.mark.parametrize("case_name", sorted(CASES))
def test_attention_ggmlfa_ref_matches_emulation(lib_spec, case_name):
    lib, spec = lib_spec
    case = CASES[case_name]
    m, hq, hkv, d, c, pos, window, scale, _data = case
    q, kc, vc = _inputs(case)
    got = _run(bind(lib, spec, "ref"), q, kc, vc, case, 1)
    want = _emulation().attention(q, kc.astype(np.float32), vc.astype(np.float32), hq, pos, scale, window)
    assert_close_or_equal(want, got, map_id=MAP_ID, variant="ref", context=f"{case_name} vs NumPy emulation")


@pytest.mark.parametrize("variant", map_variants(MAP_ID))
def test_attention_ggmlfa_threads_identical(lib_spec, variant):
    skip_unless_runnable(MAP_ID, variant)
    lib, spec = lib_spec
    _variant(spec, variant)
    fn = bind(lib, spec, variant)
    for case_name in ("prefill_gqa4_window", "decode_gqa4_full", "d80_tail16", "prefill_pos0_gqa4", "gqa3_hkv2"):
        case = CASES[case_name]
        q, kc, vc = _inputs(case)
        one = _run(fn, q, kc, vc, case, 1)
        for nth in NTH[1:]:
            got = _run(fn, q, kc, vc, case, nth, threaded=True)
            assert_close_or_equal(one, got, map_id=MAP_ID, variant=variant, context=f"{case_name} nth={nth}")


def _expf_check(lib, variant):
    lanes = {"avx2": 8, "avx512": 16}[variant]  # the family body's hook is named by its lanes' width
    fn = getattr(lib, f"km_ggmlfa_expf_check{lanes}")  # a helper: not km_<id>__<variant>
    fn.restype = ctypes.c_int64
    fn.argtypes = [ctypes.c_uint32, ctypes.c_int64, ctypes.POINTER(ctypes.c_uint32)]
    return fn


def _expf_mismatches(fn, lo, n):
    first = ctypes.c_uint32(0)
    bad = fn(lo, n, ctypes.byref(first))
    return bad, f"{first.value:#010x}"


@pytest.mark.parametrize("variant", ["avx2", "avx512"])
def test_attention_ggmlfa_vector_expf_sampled_matches_libm(lib_spec, variant):
    lib, spec = lib_spec
    _variant(spec, variant)
    fn = _expf_check(lib, variant)
    for lo, n in EXPF_SAMPLE:
        bad, first = _expf_mismatches(fn, lo, n)
        assert bad == 0, f"{MAP_ID} [{variant}] vector expf != libm expf for {bad} inputs in [{lo:#x}, +{n}), first {first}"


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("KERNELMAP_SLOW"), reason="slow (all 2^32 floats, ~1 min per variant): set "
                    "KERNELMAP_SLOW=1; test_attention_ggmlfa_vector_expf_sampled_matches_libm is the fast version")
@pytest.mark.parametrize("variant", ["avx2", "avx512"])
def test_attention_ggmlfa_vector_expf_all_inputs_match_libm(lib_spec, variant):
    lib, spec = lib_spec
    _variant(spec, variant)
    fn = _expf_check(lib, variant)
    step = 1 << 28
    for lo in range(0, 1 << 32, step):
        bad, first = _expf_mismatches(fn, lo, step)
        assert bad == 0, f"{MAP_ID} [{variant}] vector expf != libm expf for {bad} inputs in [{lo:#x}, +{step}), first {first}"


@pytest.mark.parametrize("variant", ["avx2", "avx512"])
@pytest.mark.parametrize("bad_value", [np.inf, -np.inf, np.nan])
def test_attention_ggmlfa_nonfinite_scores_match_ref(lib_spec, variant, bad_value):
    lib, spec = lib_spec
    _variant(spec, variant)
    case = (3, 4, 1, 64, 60, 40, 0, 0.125, "normal")
    q, kc, vc = _inputs(case)
    kc[0, 7, :] = bad_value  # a visible key with an infinite / NaN score: new maxima, NaN vs, inf - inf
    kc[0, 35, :5] = bad_value
    want = _run(bind(lib, spec, "ref"), q, kc, vc, case, 1)
    got = _run(bind(lib, spec, variant), q, kc, vc, case, 2)
    assert np.array_equal(want.view(np.uint32), got.view(np.uint32)), (
        f"{MAP_ID} [{variant}] non-finite score {bad_value}: "
        f"{int((want.view(np.uint32) != got.view(np.uint32)).sum())} elements differ from ref")
