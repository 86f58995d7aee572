"""The ring KV layout (position j in cell j mod C) of the maps that declare `ring` on their state ports.

Attention over a ring of C = window + M - 1 cells (the fewest codegen/ring.py allocates), filled by writing
positions 0 .. pos+M-1 in order (so older keys are overwritten, and cells no position reached are NaN),
must give the bytes of the same kernel's ref over the full-length cache: keys are visited in increasing
position whatever cell they sit in. Cases wrap inside a decode window, inside a prefill block, across row
pairs, past llama.cpp's 256-position split (the split contracts), and at Gemma 3's 512-key window.
"""

from __future__ import annotations

import numpy as np
import pytest
from ggmlfa_cases import inputs as _inputs
from ggmlfa_cases import run as _run
from kernel_harness import (
    assert_close_or_equal,
    bind,
    guarded,
    load_map_library,
    map_variants,
    ptr,
    skip_unless_runnable,
)

ATTENTION_MAPS = ("attention_f16kv_ggmlfa", "attention_kq_f16kv_ggmlfa", "attention_f16kv_ggmlfa_split2",
                  "attention_f16kv_ggmlfa_split4", "attention_f16kv_ggmlfa_dot32", "attention_kq_f16kv_ggmlfa_dot32")
CASES = {
    # name: (M, Hq, Hkv, D, pos, window, scale)
    "decode_wrapped": (1, 4, 1, 256, 300, 64, 0.0625),
    "prefill_block_across_wrap": (17, 4, 1, 256, 40, 16, 0.0625),
    "row_pairs_hkv2": (6, 8, 2, 128, 50, 5, 0.09),
    "window512_decode": (1, 4, 1, 256, 700, 512, 0.0625),
    "window512_prefill": (3, 4, 1, 64, 1030, 512, 0.125),
}
VARIANTS = [(mid, v) for mid in ATTENTION_MAPS for v in map_variants(mid)]


def _ring(cache: np.ndarray, cells: int, written: int) -> np.ndarray:
    """The ring of `cells` cells after positions 0 .. written-1 of `cache` were appended in order."""
    ring = np.full((cache.shape[0], cells, cache.shape[2]), np.nan, dtype=cache.dtype)
    for j in range(written):
        ring[:, j % cells] = cache[:, j]
    return ring


@pytest.mark.parametrize(("map_id", "variant"), VARIANTS, ids=[f"{m}-{v}" for m, v in VARIANTS])
@pytest.mark.parametrize("case_name", sorted(CASES))
def test_attention_ring_layout_equals_full_length(map_id, variant, case_name):
    skip_unless_runnable(map_id, variant)
    lib, spec = load_map_library(map_id)
    m, hq, hkv, d, pos, window, scale = CASES[case_name]
    full = (m, hq, hkv, d, pos + m, pos, window, scale, "normal")
    q, kc, vc = _inputs(full)
    want = _run(bind(lib, spec, "ref"), q, kc, vc, full, 1)
    cells = window + m - 1
    rk, rv = _ring(kc, cells, pos + m), _ring(vc, cells, pos + m)
    ring_case = (m, hq, hkv, d, cells, pos, window, scale, "normal")
    fn = bind(lib, spec, variant)
    assert np.isfinite(want).all()
    for nth in (1, 3):
        got = _run(fn, q, rk, rv, ring_case, nth)
        assert_close_or_equal(want, got, map_id=map_id, variant=variant,
                              context=f"{case_name}: ring of {cells} cells vs full length, nth={nth}")


@pytest.mark.parametrize("variant", map_variants("kv_append_f16"))
def test_kv_append_ring_writes_cell_pos_mod_cells(variant):
    skip_unless_runnable("kv_append_f16", variant)
    lib, spec = load_map_library("kv_append_f16")
    m, h, d, cells, pos = 5, 2, 20, 8, 6  # positions 6 .. 10 land in cells 6, 7, 0, 1, 2
    x = (np.random.default_rng(5).standard_normal((m, h * d)) * 10).astype(np.float32)
    fn = bind(lib, spec, variant)
    for nth in (1, 2):
        cache, check = guarded((h, cells, d), np.uint16)
        want = cache.copy()
        for r in range(m):
            want[:, (pos + r) % cells, :] = x[r].reshape(h, d).astype(np.float16).view(np.uint16)
        for ith in range(nth):
            fn(ptr(cache), ptr(x), m, h, d, cells, pos, ith, nth)
            check()
        assert_close_or_equal(want, cache, map_id="kv_append_f16", variant=variant, context=f"ring nth={nth}")
