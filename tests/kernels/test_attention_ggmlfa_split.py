"""Tests for attention_f16kv_ggmlfa_split<N>, _dot32_split2 and attention_kq_f16kv_ggmlfa_dot32_split2: llama.cpp's
N-thread flash-attention order.

Each split map (N = 2, 4; N = 2 with the 8-lane score dot of llama.cpp's AVX2 build, for the prescaled and the
kq-scaled attention) is checked: every variant the map declares byte-identical with its ref for
every (ith, nth); ref equal to the NumPy emulation of llama.cpp's N-thread split (tests/parity_fa/
fa_emulation.py: split_chunks + attend_row_split with the map's dot width, itself checked against
llama.cpp's own attention outputs by tests/kernels/test_ops_vs_llama.py); below a 512-cell KV view
(positions < 256) equal to the one-thread contract of the same dot (attention_f16kv_ggmlfa or
attention_f16kv_ggmlfa_dot32). Cases straddle llama.cpp's view lengths (256, 512, 768,
1024, 1280 cells), sliding windows that leave whole ranges empty, row pairs with different view lengths
and heads sharing a KV head. Cache rows at or beyond pos + M are NaN, so a read past the causal limit
fails loudly.
"""

from __future__ import annotations

import numpy as np
import pytest
from ggmlfa_cases import emulation as _emulation
from ggmlfa_cases import inputs as _inputs
from ggmlfa_cases import run as _run
from kernel_harness import assert_close_or_equal, bind, load_map_library, map_variants, skip_unless_runnable

# key: (map id, n_split, score-dot width, the one-thread map of the same dot)
SPLITS = {
    "split2": ("attention_f16kv_ggmlfa_split2", 2, 64, "attention_f16kv_ggmlfa"),
    "split4": ("attention_f16kv_ggmlfa_split4", 4, 64, "attention_f16kv_ggmlfa"),
    "dot32_split2": ("attention_f16kv_ggmlfa_dot32_split2", 2, 32, "attention_f16kv_ggmlfa_dot32"),
    # the kq-scaled attention (Llama / Qwen: q unscaled, each score times the scale), AVX2 build, 2 threads
    "kq_dot32_split2": ("attention_kq_f16kv_ggmlfa_dot32_split2", 2, 32, "attention_kq_f16kv_ggmlfa_dot32"),
    "kq_split2": ("attention_kq_f16kv_ggmlfa_split2", 2, 64, "attention_kq_f16kv_ggmlfa"),
    "kq_split4": ("attention_kq_f16kv_ggmlfa_split4", 4, 64, "attention_kq_f16kv_ggmlfa"),
}
SPLIT_MAPS = {key: spec[0] for key, spec in SPLITS.items()}
CASES = {
    # name: (M, Hq, Hkv, D, C, pos, window, scale, data)
    "decode_255_no_split": (1, 4, 1, 256, 300, 255, 0, 0.0625, "normal"),
    "decode_256_first_split": (1, 4, 1, 256, 300, 256, 0, 0.0625, "normal"),
    "decode_511_window": (1, 4, 1, 256, 520, 511, 512, 0.0625, "normal"),
    "decode_512_window_drops_key0": (1, 4, 1, 256, 520, 512, 512, 0.0625, "normal"),
    "decode_767_window": (1, 4, 1, 256, 800, 767, 512, 0.0625, "rising_slow"),
    "decode_999_window": (1, 4, 1, 256, 1024, 999, 512, 0.0625, "normal"),
    "decode_999_full": (1, 4, 1, 256, 1024, 999, 0, 0.0625, "rising_slow"),
    "prefill_across_256": (20, 4, 1, 256, 300, 246, 0, 0.0625, "normal"),
    "prefill_across_768_window": (12, 4, 1, 256, 800, 760, 512, 0.0625, "normal"),
    "d80_tail_600": (3, 3, 3, 80, 620, 600, 0, 0.1118034, "normal"),
    "d16_window_empty_range": (5, 4, 2, 16, 700, 640, 100, 0.25, "normal"),
    "gqa8_row_pairs": (6, 8, 2, 128, 600, 520, 0, 0.09, "normal"),
    "window_one_range_of_four": (2, 4, 1, 64, 1100, 1050, 30, 0.125, "large"),
}
EMULATED = ("decode_256_first_split", "decode_767_window", "decode_999_window", "d16_window_empty_range",
            "window_one_range_of_four")
NTH = (1, 2, 3, 5)


ALL_PARAMS = [(n, v) for n, mid in SPLIT_MAPS.items() for v in map_variants(mid)]
VARIANT_PARAMS = [(n, v) for n, v in ALL_PARAMS if v != "ref"]


@pytest.fixture(scope="module")
def libs():
    return {n: load_map_library(mid) for n, mid in SPLIT_MAPS.items()}


def _fn(libs, n, variant):
    lib, spec = libs[n]
    skip_unless_runnable(SPLIT_MAPS[n], variant)
    return bind(lib, spec, variant)


@pytest.mark.parametrize(("n", "variant"), VARIANT_PARAMS)
@pytest.mark.parametrize("case_name", sorted(CASES))
def test_attention_ggmlfa_split_variants_match_ref(libs, n, variant, case_name):
    case = CASES[case_name]
    q, kc, vc = _inputs(case)
    want = _run(_fn(libs, n, "ref"), q, kc, vc, case, 1)
    got = _run(_fn(libs, n, variant), q, kc, vc, case, 2)
    assert np.isfinite(want).all()
    assert_close_or_equal(want, got, map_id=SPLIT_MAPS[n], variant=variant, context=f"{case_name} nth=2")


@pytest.mark.parametrize("n", sorted(n for n in SPLIT_MAPS if not n.startswith("kq_")))
@pytest.mark.parametrize("case_name", EMULATED)
def test_attention_ggmlfa_split_ref_matches_emulation(libs, n, case_name):
    """(The kq map's ref is the same split ref with the scale on the scores instead of q; the emulation scales q, so
    the kq map is checked against its one-thread contract below and against llama.cpp's logits end to end:
    tests/e2e/test_families_avx2.py.)"""
    case = CASES[case_name]
    m, hq, hkv, d, c, pos, window, scale, _data = case
    _mid, n_split, width, _plain = SPLITS[n]
    q, kc, vc = _inputs(case)
    got = _run(_fn(libs, n, "ref"), q, kc, vc, case, 1)
    want = _emulation().attention(q, kc.astype(np.float32), vc.astype(np.float32), hq, pos, scale, window,
                                  n_split=n_split, dot_width=width)
    assert_close_or_equal(want, got, map_id=SPLIT_MAPS[n], variant="ref",
                          context=f"{case_name} vs NumPy emulation of llama.cpp on {n_split} threads, dot {width}")


@pytest.mark.parametrize(("n", "variant"), ALL_PARAMS)
def test_attention_ggmlfa_split_threads_identical(libs, n, variant):
    fn = _fn(libs, n, variant)
    for case_name in ("prefill_across_256", "prefill_across_768_window", "gqa8_row_pairs", "d80_tail_600",
                      "decode_999_window"):
        case = CASES[case_name]
        q, kc, vc = _inputs(case)
        one = _run(fn, q, kc, vc, case, 1)
        for nth in NTH[1:]:
            got = _run(fn, q, kc, vc, case, nth, threaded=True)
            assert_close_or_equal(one, got, map_id=SPLIT_MAPS[n], variant=variant, context=f"{case_name} nth={nth}")


@pytest.mark.parametrize("n", sorted(SPLIT_MAPS))
def test_attention_ggmlfa_split_below_512_cells_equals_ggml_fa(libs, n):
    plain_map = SPLITS[n][3]
    plain_lib, plain_spec = load_map_library(plain_map)
    plain = bind(plain_lib, plain_spec, "ref")
    split = _fn(libs, n, "ref")
    case = (256, 4, 1, 256, 300, 0, 0, 0.0625, "normal")  # rows at positions 0 .. 255: KV views of 256 cells
    q, kc, vc = _inputs(case)
    assert_close_or_equal(_run(plain, q, kc, vc, case, 1), _run(split, q, kc, vc, case, 1), map_id=SPLIT_MAPS[n],
                          variant="ref", context=f"positions 0..255 vs {plain_map}")
    case = (1, 4, 1, 256, 300, 256, 0, 0.0625, "normal")  # position 256: a 512-cell view, split
    q, kc, vc = _inputs(case)
    assert not np.array_equal(_run(plain, q, kc, vc, case, 1), _run(split, q, kc, vc, case, 1)), (
        "position 256 should round differently from the one-thread order")
