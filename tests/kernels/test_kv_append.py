"""Differential tests for kv_append_f16 and kv_append_f32: variants byte-identical with ref, ref equal to NumPy.

NumPy's float32 -> float16 cast rounds to nearest even like the contract (NaN compared as the
contract's canonical quiet NaN). Only rows pos .. pos+M-1 of each head may change: the rest of the
cache keeps its fill pattern, and guard bytes surround the whole cache.
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

CASES = {
    # name: (M, H, D, C, pos)
    "decode_1x1x256": (1, 1, 256, 64, 17),
    "prefill_9x1x256": (9, 1, 256, 64, 0),
    "heads_5x3x20": (5, 3, 20, 16, 11),
    "odd_d_2x2x7": (2, 2, 7, 4, 2),
}
KINDS = ("f16", "f32")
VARIANTS = [(kind, v) for kind in KINDS for v in map_variants(f"kv_append_{kind}")]


def _inputs(m, h, d):
    rng = np.random.default_rng(m * 1000 + h * 10 + d)
    x = (rng.standard_normal((m, h * d)) * 10).astype(np.float32)
    flat = x.reshape(-1)
    flat[::9] = np.float32(7e4)        # overflows f16
    flat[1::9] = np.float32(3e-6)      # f16 subnormal
    flat[2::9] = np.float32(-1e-9)     # rounds to -0 in f16
    flat[3::9] = np.float32(65519.0)   # rounds down to the largest f16
    flat[4::17] = np.nan
    return x


def _expected(x, h, d, c, pos, kind, fill):
    m = x.shape[0]
    cache = fill.copy()
    vals = x.reshape(m, h, d).transpose(1, 0, 2)
    if kind == "f16":
        with np.errstate(over="ignore"):
            conv = vals.astype(np.float16).view(np.uint16)
        conv = np.where(np.isnan(vals), (vals.view(np.uint32) >> 16).astype(np.uint16) & 0x8000 | 0x7E00, conv)
        cache[:, pos:pos + m, :] = conv.astype(np.uint16)
    else:
        cache[:, pos:pos + m, :] = vals.view(np.uint32)
    return cache


@pytest.mark.parametrize("kind,variant", VARIANTS, ids=[f"{k}-{v}" for k, v in VARIANTS])
@pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
def test_kv_append_variants_match_ref(kind, variant, case):
    map_id = f"kv_append_{kind}"
    lib, spec = load_map_library(map_id)
    skip_unless_runnable(map_id, variant)
    m, h, d, c, pos = CASES[case]
    x = _inputs(m, h, d)
    bits = np.uint16 if kind == "f16" else np.uint32
    fn = bind(lib, spec, variant)
    ref = bind(lib, spec, "ref")
    base, _ = guarded((h, c, d), bits)
    want = base.copy()
    ref(ptr(want), ptr(x), m, h, d, c, pos, 0, 1)
    for nth in (1, 2, 3):
        cache, check = guarded((h, c, d), bits)
        for ith in range(nth):
            fn(ptr(cache), ptr(x), m, h, d, c, pos, ith, nth)
            check()
        assert_close_or_equal(want, cache, map_id=map_id, variant=variant, context=f"{case} nth={nth}")


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
def test_kv_append_ref_matches_numpy(kind, case):
    map_id = f"kv_append_{kind}"
    lib, spec = load_map_library(map_id)
    m, h, d, c, pos = CASES[case]
    x = _inputs(m, h, d)
    bits = np.uint16 if kind == "f16" else np.uint32
    cache, check = guarded((h, c, d), bits)
    fill = cache.copy()
    fn = bind(lib, spec, "ref")
    for ith in range(2):
        fn(ptr(cache), ptr(x), m, h, d, c, pos, ith, 2)
        check()
    assert_close_or_equal(_expected(x, h, d, c, pos, kind, fill), cache, map_id=map_id, variant="ref",
                          context=f"{case} vs numpy")
