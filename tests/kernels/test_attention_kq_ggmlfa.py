"""Tests for attention_kq_f16kv_ggmlfa's and attention_kq_f16kv_ggmlfa_dot32's SIMD variants: each byte-identical
with its ref for every partition (the _dot32 map: the same with the AVX2 build's 32-partial score dot,
attention_kq.f16kv.ggml_fa_dot32.v1).

Contract attention_kq.f16kv.ggml_fa.v1 is llama.cpp's CPU flash attention with kq_scale multiplying each
score after the f16 dot (the Llama / Qwen graphs). Its SIMD variants are the ggml_fa kernels with the
family parameter "where the scale applies" set to per score, so they run on every case of the ggml_fa
suite (tests/kernels/test_attention_ggmlfa.py) plus the head layouts of the Llama-family models. The ref
itself is checked against llama.cpp's attention outputs in test_family_ops_vs_llama.py and against the
ggml_fa contract in test_family_ops.py.
"""

from __future__ import annotations

import numpy as np
import pytest
from ggmlfa_cases import inputs as _inputs
from ggmlfa_cases import run as _run
from kernel_harness import assert_close_or_equal, bind, load_map_library, map_variants, skip_unless_runnable
from test_attention_ggmlfa import CASES as GGMLFA_CASES

MAP_IDS = ("attention_kq_f16kv_ggmlfa", "attention_kq_f16kv_ggmlfa_dot32")
CASES = {
    **GGMLFA_CASES,
    # (M, Hq, Hkv, D, C, pos, window, scale, data): SmolLM2-135M's heads (9 query heads on 3 KV heads, D 64)
    "smollm2_prefill_pos0": (40, 9, 3, 64, 48, 0, 0, 0.125, "normal"),
    "smollm2_decode": (1, 9, 3, 64, 300, 260, 0, 0.125, "normal"),
    # Qwen-like: 7 query heads per KV head, D 128, one prefill chunk after earlier tokens
    "gqa7_d128_chunk": (9, 14, 2, 128, 60, 30, 0, 0.08838835, "rising"),
    # row pairs of 4 heads (8 items) with D 160 and 224: a column count the 32-column chunk divides but 64 does not
    "row_pairs_d160": (4, 8, 2, 160, 24, 12, 0, 0.0790569, "normal"),
    "row_pairs_d224": (4, 8, 2, 224, 24, 12, 0, 0.0668153, "normal"),
}
NTH = (1, 2, 3, 5)


MAP_VARIANTS = [(m, v) for m in MAP_IDS for v in map_variants(m, ref=False)]


@pytest.fixture(scope="module")
def lib_specs():
    return {m: load_map_library(m) for m in MAP_IDS}


@pytest.mark.parametrize("map_id,variant", MAP_VARIANTS)
@pytest.mark.parametrize("case_name", sorted(CASES))
def test_attention_kq_variants_match_ref(lib_specs, map_id, variant, case_name):
    skip_unless_runnable(map_id, variant)
    lib, spec = lib_specs[map_id]
    case = CASES[case_name]
    q, kc, vc = _inputs(case)
    want = _run(bind(lib, spec, "ref"), q, kc, vc, case, 1)
    assert np.isfinite(want).all()
    for nth in NTH:
        got = _run(bind(lib, spec, variant), q, kc, vc, case, nth)
        assert_close_or_equal(want, got, map_id=map_id, variant=variant, context=f"{case_name} nth={nth}")


@pytest.mark.parametrize("map_id,variant", MAP_VARIANTS)
@pytest.mark.parametrize("bad_value", [np.inf, -np.inf, np.nan])
def test_attention_kq_nonfinite_scores_match_ref(lib_specs, map_id, variant, bad_value):
    skip_unless_runnable(map_id, variant)
    lib, spec = lib_specs[map_id]
    case = (3, 4, 1, 64, 60, 40, 0, 0.125, "normal")
    q, kc, vc = _inputs(case)
    kc[0, 7, :] = bad_value  # a visible key with an infinite / NaN score: new maxima, NaN vs, inf - inf
    kc[0, 35, :5] = bad_value
    want = _run(bind(lib, spec, "ref"), q, kc, vc, case, 1)
    got = _run(bind(lib, spec, variant), q, kc, vc, case, 2)
    assert np.array_equal(want.view(np.uint32), got.view(np.uint32)), (
        f"{map_id} [{variant}] non-finite score {bad_value}: "
        f"{int((want.view(np.uint32) != got.view(np.uint32)).sum())} elements differ from ref")
