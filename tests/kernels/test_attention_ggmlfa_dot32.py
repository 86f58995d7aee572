"""Tests for attention_f16kv_ggmlfa_dot32 (contract attention.f16kv.ggml_fa_dot32.v1: llama.cpp's flash attention as
its AVX2 build computes it): every variant byte-identical with ref, ref equal to the NumPy emulation with the
8-lane score dot, every thread count the same bytes, and the contract really differs from ggml_fa.v1.

The cases are test_attention_ggmlfa.py's (D tails of 16 and 48 past a multiple of 32, windows, GQA groups,
prefill blocks); llama.cpp's own tensors for this order are checked in test_ops_vs_llama.py (fixture
tests/fixtures/llama_ops_avx2).
"""

from __future__ import annotations

import numpy as np
import pytest
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
from test_attention_ggmlfa import CASES

MAP_ID = "attention_f16kv_ggmlfa_dot32"
NTH = (1, 2, 3, 5)


@pytest.fixture(scope="module")
def lib_spec():
    return load_map_library(MAP_ID)


def _runnable(spec, name):
    v = next(v for v in spec["variants"] if v["name"] == name)
    ok, why = host_can_run(v["requires"])
    if not ok:
        pytest.skip(f"{MAP_ID} [{name}]: host lacks {why}")


@pytest.mark.parametrize("variant", map_variants(MAP_ID, ref=False))
@pytest.mark.parametrize("case_name", sorted(CASES))
def test_attention_dot32_variants_match_ref(lib_spec, variant, case_name):
    skip_unless_runnable(MAP_ID, variant)
    lib, spec = lib_spec
    _runnable(spec, variant)
    case = CASES[case_name]
    q, kc, vc = _inputs(case)
    want = _run(bind(lib, spec, "ref"), q, kc, vc, case, 1)
    got = _run(bind(lib, spec, variant), q, kc, vc, case, 2)
    assert np.isfinite(want).all()
    assert_close_or_equal(want, got, map_id=MAP_ID, variant=variant, context=f"{case_name} nth=2")


@pytest.mark.parametrize("case_name", sorted(CASES))
def test_attention_dot32_ref_matches_emulation(lib_spec, case_name):
    lib, spec = lib_spec
    case = CASES[case_name]
    _m, hq, _hkv, _d, _c, pos, window, scale, _data = case
    q, kc, vc = _inputs(case)
    got = _run(bind(lib, spec, "ref"), q, kc, vc, case, 1)
    want = _emulation().attention(q, kc.astype(np.float32), vc.astype(np.float32), hq, pos, scale, window,
                                  dot_width=32)
    assert_close_or_equal(want, got, map_id=MAP_ID, variant="ref", context=f"{case_name} vs NumPy emulation (dot 32)")


def test_attention_dot32_differs_from_the_avx512_builds_order(lib_spec):
    """Not a renamed ggml_fa.v1: on a long decode row most outputs differ from the 64-partial emulation."""
    lib, spec = lib_spec
    case = CASES["decode_gqa4_full"]
    _m, hq, _hkv, _d, _c, pos, window, scale, _data = case
    q, kc, vc = _inputs(case)
    got = _run(bind(lib, spec, "ref"), q, kc, vc, case, 1)
    other = _emulation().attention(q, kc.astype(np.float32), vc.astype(np.float32), hq, pos, scale, window)
    assert np.mean(got != other) > 0.1, "the dot32 order gave the AVX-512 build's bits on a 201-key row"


@pytest.mark.parametrize("variant", map_variants(MAP_ID))
def test_attention_dot32_threads_identical(lib_spec, variant):
    skip_unless_runnable(MAP_ID, variant)
    lib, spec = lib_spec
    _runnable(spec, variant)
    fn = bind(lib, spec, variant)
    for case_name in ("prefill_gqa4_window", "decode_gqa4_full", "d80_tail16", "prefill_pos0_gqa4", "gqa3_hkv2"):
        case = CASES[case_name]
        q, kc, vc = _inputs(case)
        one = _run(fn, q, kc, vc, case, 1)
        for nth in NTH[1:]:
            got = _run(fn, q, kc, vc, case, nth, threaded=True)
            assert_close_or_equal(one, got, map_id=MAP_ID, variant=variant, context=f"{case_name} nth={nth}")
