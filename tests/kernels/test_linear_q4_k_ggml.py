"""Differential tests for map linear_q4_k_q8_k_ggml (contract linear.q4_k.q8_k.ggml.v1: llama.cpp's x86 q4_K order).

Every SIMD variant must be byte-identical to the ref (M 1..130 across the 4-row tile and the 8-column
group tails, K 1..11 superblocks, tiny/huge scales, nth 1..3); the ref must equal the NumPy oracle
ggml_linear_orders.linear_q4_k (llama.cpp's repacked order for weights of N % 8 == 0 rows, its vec_dot
order otherwise) bit for bit (random data and real q4_k rows of the Gemma 3 GGUF), and must not depend
on the thread partition.
"""

from __future__ import annotations

import numpy as np
import pytest
from ggml_linear_orders import linear_q4_k
from hypothesis import given
from hypothesis import strategies as st
from kernel_harness import bind, load_map_library, map_variants, runnable_variants, skip_unless_runnable
from linear_ggml_harness import (
    QK_K,
    RANDOM_SCALES,
    RANDOM_SHAPE_SETTINGS,
    assert_partition_invariant,
    assert_ref_matches,
    assert_variants_match_ref,
    model_tensors,
    pack_q8_k,
    random_blocks,
    runner,
    simd_variants,
)

MAP_ID = "linear_q4_k_q8_k_ggml"
BLOCK = 144
# (M, N, K): one block, M across the 4-row tile and its tail, N across the 8-column group and its tail
SHAPES = [(1, 1, 256), (1, 8, 768), (2, 9, 2304), (3, 17, 512), (4, 16, 1024), (5, 7, 2816), (7, 23, 256),
          (16, 8, 512), (17, 13, 768), (33, 3, 256), (128, 9, 512), (130, 5, 256),
          # the prefill GEMM (M >= 16, N % 8 == 0): 16-column groups and their 8-column tail, panels of 8
          # superblocks and their tail (K = 9 and 12 blocks), the 576-row super-tile (KQG_FA 1152 / 2) and the
          # row-tile tails
          (16, 32, 512), (21, 40, 2304), (580, 24, 256), (137, 48, 3072)]
_run = runner(w_offset=4, x_offset=36)  # weights: 4-byte alignment only


def random_weights(n: int, k: int, rng: np.random.Generator, scale: float = 1e-2) -> np.ndarray:
    """Random q4_k rows [n, k/256 * 144] (all codes, scales, mins) with finite f16 d / dmin of magnitude ~scale."""
    return random_blocks(n, k // QK_K, BLOCK, rng, scale=scale, d_offsets=(0, 2), signed=False)


def float_rows(m: int, k: int, rng: np.random.Generator, scale: float = 1.0) -> np.ndarray:
    return (rng.standard_normal((m, k)) * scale).astype(np.float32)


@pytest.fixture(scope="module")
def lib():
    return load_map_library(MAP_ID)


def _variant_cases(rng: np.random.Generator):
    for m, n, k in SHAPES:
        yield f"random_{m}x{n}x{k}", m, n, k, random_weights(n, k, rng), float_rows(m, k, rng)
    m, n, k = 6, 11, 2304
    w = random_weights(n, k, rng)
    yield "zero_activations", m, n, k, w, np.zeros((m, k), np.float32)
    yield "zero_weights", m, n, k, np.zeros_like(w), float_rows(m, k, rng)
    yield "large_magnitudes", m, n, k, random_weights(n, k, rng, scale=6e4), float_rows(m, k, rng, 1e30)
    yield "tiny_magnitudes", m, n, k, random_weights(n, k, rng, scale=1e-6), float_rows(m, k, rng, 1e-20)
    top = np.full_like(w, 0xFF).reshape(n, -1, BLOCK)  # every code, scale and min at its largest
    top[:, :, 0:4] = np.array([1.0, 1.0], np.float16).view(np.uint8)  # finite d = dmin = 1 (0xFFFF is a NaN)
    yield "extreme_codes", m, n, k, top.reshape(n, -1), float_rows(m, k, rng)
    # all codes, scales and mins 15/63/63 against all-127 activations: |isum| = 63*15*127*256 > 2**24,
    # so (float)isum rounds (the SIMD cvtdq2ps must round like the ref's cast)
    wx = np.full_like(w, 0xFF).reshape(n, -1, BLOCK)
    wx[:, :, 0:4] = np.array([1.0, 0.5], np.float16).view(np.uint8)
    yield "isum_beyond_2_24", m, n, k, wx.reshape(n, -1), np.ones((m, k), np.float32)
    mg, ng, kg = 20, 24, 2304  # the same extremes through the prefill GEMM (M >= 16, N % 8 == 0)
    wg = np.full((ng, kg // QK_K * BLOCK), 0xFF, np.uint8).reshape(ng, -1, BLOCK)
    wg[:, :, 0:4] = np.array([1.0, 0.5], np.float16).view(np.uint8)
    yield "isum_beyond_2_24_gemm", mg, ng, kg, wg.reshape(ng, -1), np.ones((mg, kg), np.float32)
    yield "large_magnitudes_gemm", mg, ng, kg, random_weights(ng, kg, rng, scale=6e4), float_rows(mg, kg, rng, 1e30)
    yield "decode_row", 1, 37, 1024, random_weights(37, 1024, rng), float_rows(1, 1024, rng)


@pytest.mark.parametrize("variant", map_variants(MAP_ID, ref=False))
def test_linear_q4_k_ggml_variants_match_ref(lib, variant):
    lib_, spec = lib
    skip_unless_runnable(MAP_ID, variant)
    cases = ((name, m, n, k, w, pack_q8_k(x)) for name, m, n, k, w, x in _variant_cases(np.random.default_rng(7)))
    assert_variants_match_ref(lib_, spec, _run, cases, [variant])


@pytest.mark.parametrize("n", [11, 16], ids=["vec_dot_order", "repacked_order"])
def test_linear_q4_k_ggml_nan_scales_give_nan_in_every_variant(lib, n):
    """All-0xFF blocks (d = dmin = f16 NaN): every output is the scales' NaN in the ref and in every variant.

    Only NaN-ness is the contract here: the sign of the NaN follows which operand the compiler puts
    first in a commutative add, and in the vec_dot order (N % 8 != 0) the ref and the SIMD variants give
    NaNs of either sign (y = acc + accm with acc = NaN(d) and accm = -NaN(dmin)).
    """
    lib_, spec = lib
    m, k = 6, 2304
    w = np.full((n, k // QK_K * BLOCK), 0xFF, np.uint8)
    x = pack_q8_k(float_rows(m, k, np.random.default_rng(5)))
    for variant in runnable_variants(MAP_ID):
        for nth in (1, 3):
            y = _run(bind(lib_, spec, variant), w, x, m, n, k, nth)  # y starts as NaN 0x7fc00000
            mag = y.view(np.uint32) & 0x7FFFFFFF  # the f16 NaN 0xFFFF widened is 0xFFFFE000: its payload, any sign
            bad = np.flatnonzero(mag != 0x7FFFE000)
            assert bad.size == 0, (f"{MAP_ID} [{variant}] N={n} nth={nth}: {bad.size} outputs are not the scales' "
                                   f"NaN, first {[hex(int(v)) for v in y.view(np.uint32).reshape(-1)[bad[:4]]]}")


@pytest.mark.parametrize("shape", SHAPES[:8], ids=[f"{m}x{n}x{k}" for m, n, k in SHAPES[:8]])
def test_linear_q4_k_ggml_ref_matches_oracle(lib, shape):
    m, n, k = shape
    lib_, spec = lib
    rng = np.random.default_rng([SHAPES.index(shape), 44])
    w = random_weights(n, k, rng)
    x = float_rows(m, k, rng)
    assert_ref_matches(lib_, spec, _run, linear_q4_k(x, w), w, pack_q8_k(x), m, n, k, nth=1,
                       context=f"vs ggml_linear_orders.linear_q4_k shape={shape}")


def test_linear_q4_k_ggml_ref_is_partition_invariant(lib):
    lib_, spec = lib
    rng = np.random.default_rng(11)
    m, n, k = 3, 19, 768
    w = random_weights(n, k, rng)
    xq = pack_q8_k(float_rows(m, k, rng))
    assert_partition_invariant(lib_, spec, _run, w, xq, m, n, k, (2, 3, 4, 11, 19, 23))


@pytest.mark.model
def test_linear_q4_k_ggml_ref_matches_oracle_on_model_rows(lib, model_path):
    lib_, spec = lib
    rng = np.random.default_rng(3)
    for name, k, rows in model_tensors(model_path, "q4_k"):
        n = 40
        start = int(rng.integers(0, rows.shape[0] - n))
        w = np.ascontiguousarray(rows[start:start + n])
        x = float_rows(3, k, rng)
        assert_ref_matches(lib_, spec, _run, linear_q4_k(x, w), w, pack_q8_k(x), 3, n, k, nth=2,
                           context=f"tensor={name} rows={start}..{start + n - 1} K={k}")


@RANDOM_SHAPE_SETTINGS
@given(m=st.integers(1, 10), n=st.integers(1, 20), nb=st.integers(1, 11), nth=st.integers(1, 4), **RANDOM_SCALES)
def test_linear_q4_k_ggml_variants_match_ref_on_random_shapes(lib, m, n, nb, nth, seed, wscale, xscale):
    lib_, spec = lib
    rng = np.random.default_rng(seed)
    k = nb * QK_K
    w = random_weights(n, k, rng, scale=wscale)
    xq = pack_q8_k(float_rows(m, k, rng, xscale))
    assert_variants_match_ref(lib_, spec, _run, [(f"seed={seed}", m, n, k, w, xq)], simd_variants(spec),
                              nths=(nth,), threaded_nth=None)
