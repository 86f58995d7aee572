"""Differential tests for linear_q6_k_q8_k_ggml (contract linear.q6_k.q8_k.ggml.v1, llama.cpp's x86 order).

Every SIMD variant must be byte-identical to the ref (M 1..130 with tile tails, N tails, 1..11
superblocks, tiny and huge scales, nth 1..4); the ref must equal the NumPy statement of llama.cpp's
vec_dot_q6_K_q8_K order (tests/support/ggml_linear_orders.linear_q6_k) bit for bit, on random
weights and on real ffn_down rows of the Gemma 3 GGUF; and the ref must not depend on (ith, nth).
"""

from __future__ import annotations

import numpy as np
import pytest
from ggml_linear_orders import linear_q6_k
from hypothesis import given
from hypothesis import strategies as st
from kernel_harness import load_map_library, map_variants, skip_unless_runnable
from linear_ggml_harness import (
    Q8_K_DTYPE,
    QK_K,
    RANDOM_SCALES,
    RANDOM_SHAPE_SETTINGS,
    assert_partition_invariant,
    assert_ref_matches,
    assert_rows_independent,
    assert_variants_match_ref,
    model_tensors,
    pack_q8_k,
    random_blocks,
    runner,
    simd_variants,
)

MAP_ID = "linear_q6_k_q8_k_ggml"
BLOCK = 210

# (M, N, superblocks): tile tails of 8/4/2/1 rows, N tails, 1..11 superblocks (the model's K=2048 is 8);
# the last three cross the SIMD variants' ~64 KiB column chunks (28 columns at 11 superblocks, 62 at 5)
SHAPES = [(1, 1, 1), (1, 7, 3), (2, 5, 9), (3, 4, 8), (4, 3, 4), (5, 13, 2), (7, 6, 1), (8, 5, 8), (9, 6, 10),
          (12, 3, 2), (15, 2, 3), (16, 7, 8), (17, 4, 5), (33, 3, 2), (130, 2, 8), (1, 41, 11), (19, 40, 11),
          (14, 70, 5),
          # the prefill GEMM (M >= 16): 16-column groups and short tails, panels of 4 superblocks and their
          # tail, the 144-row super-tile (KQG_FA 1152 / 8 accumulators) and the row-tile tails
          (16, 16, 2), (21, 40, 9), (70, 24, 5), (150, 33, 12)]
_run = runner(w_offset=4, x_offset=36)


def random_weights(n: int, nb: int, rng: np.random.Generator, scale: float = 1e-2) -> np.ndarray:
    """Random q6_k blocks uint8 [n, nb*210]: random codes and int8 scales, finite signed f16 d of magnitude ~scale."""
    return random_blocks(n, nb, BLOCK, rng, scale=scale, d_offsets=(208,), signed=True)


def activations(m: int, k: int, rng: np.random.Generator, scale: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    xf = (rng.standard_normal((m, k)) * scale).astype(np.float32)
    return xf, pack_q8_k(xf)


@pytest.fixture(scope="module")
def lib():
    return load_map_library(MAP_ID)


def _edge_cases(rng: np.random.Generator):
    m, n, nb = 6, 5, 9
    k = nb * QK_K
    _, x = activations(m, k, rng)
    yield "zero_activations", m, n, k, random_weights(n, nb, rng), pack_q8_k(np.zeros((m, k), np.float32))
    yield "zero_weights", m, n, k, np.zeros((n, nb * BLOCK), np.uint8), x
    yield "extreme_codes", m, n, k, np.full((n, nb * BLOCK), 0xFF, np.uint8), x
    big = random_weights(n, nb, rng)
    big.reshape(n, nb, BLOCK)[:, :, 192:208] = 0x80  # every scale -128
    yield "scale_minus_128", m, n, k, big, x
    yield "large_magnitudes", m, n, k, random_weights(n, nb, rng, scale=6e4), activations(m, k, rng, 1e30)[1]
    yield "tiny_magnitudes", m, n, k, random_weights(n, nb, rng, scale=1e-7), activations(m, k, rng, 1e-30)[1]
    mg, ng = 20, 17  # the extremes through the prefill GEMM (M >= 16)
    _, xg = activations(mg, k, rng)
    yield "extreme_codes_gemm", mg, ng, k, np.full((ng, nb * BLOCK), 0xFF, np.uint8), xg
    bigg = random_weights(ng, nb, rng)
    bigg.reshape(ng, nb, BLOCK)[:, :, 192:208] = 0x80
    yield "scale_minus_128_gemm", mg, ng, k, bigg, xg
    yield "large_magnitudes_gemm", mg, ng, k, random_weights(ng, nb, rng, scale=6e4), activations(mg, k, rng, 1e30)[1]
    yield "no_blocks_gemm", 16, ng, 0, np.zeros((ng, 0), np.uint8), np.zeros((16, 0), Q8_K_DTYPE)
    yield "no_blocks", m, n, 0, np.zeros((n, 0), np.uint8), np.zeros((m, 0), Q8_K_DTYPE)


@pytest.mark.parametrize("variant", map_variants(MAP_ID, ref=False))
def test_linear_q6_k_ggml_variants_match_ref(lib, variant):
    lib_, spec = lib
    skip_unless_runnable(MAP_ID, variant)
    variants = [variant]
    rng = np.random.default_rng(5)
    cases = [(f"random_{m}x{n}x{nb}", m, n, nb * QK_K, random_weights(n, nb, rng), activations(m, nb * QK_K, rng)[1])
             for m, n, nb in SHAPES]
    cases += list(_edge_cases(rng))
    assert_variants_match_ref(lib_, spec, _run, cases, variants)
    name, m, n, k, w, x = cases[-1]
    assert name == "no_blocks" and k == 0
    assert_ref_matches(lib_, spec, _run, np.zeros((m, n), np.float32), w, x, m, n, k, nth=1,
                       context="K = 0 must give +0.0 everywhere")


@RANDOM_SHAPE_SETTINGS
@given(m=st.integers(1, 20), n=st.integers(1, 10), nb=st.integers(1, 9), nth=st.integers(1, 4), **RANDOM_SCALES)
def test_linear_q6_k_ggml_variants_match_ref_on_random_shapes(lib, m, n, nb, nth, seed, wscale, xscale):
    lib_, spec = lib
    rng = np.random.default_rng(seed)
    k = nb * QK_K
    w = random_weights(n, nb, rng, scale=wscale)
    _, x = activations(m, k, rng, xscale)
    assert_variants_match_ref(lib_, spec, _run, [(f"seed={seed}", m, n, k, w, x)], simd_variants(spec),
                              nths=(nth,), threaded_nth=None)


@pytest.mark.parametrize("shape", [(1, 9, 1), (3, 7, 8), (5, 4, 11), (2, 33, 3)],
                         ids=lambda s: f"{s[0]}x{s[1]}x{s[2]}")
def test_linear_q6_k_ggml_ref_matches_ggml_order(lib, shape):
    lib_, spec = lib
    m, n, nb = shape
    rng = np.random.default_rng(list(shape))
    k = nb * QK_K
    w = random_weights(n, nb, rng, scale=0.05)
    xf, x = activations(m, k, rng)
    assert_ref_matches(lib_, spec, _run, linear_q6_k(xf, w), w, x, m, n, k, nth=2,
                       context=f"vs ggml_linear_orders.linear_q6_k M={m} N={n} K={k}")


def test_linear_q6_k_ggml_ref_is_partition_invariant(lib):
    lib_, spec = lib
    rng = np.random.default_rng(11)
    m, n, nb = 3, 10, 3
    w = random_weights(n, nb, rng)
    _, x = activations(m, nb * QK_K, rng)
    want = assert_partition_invariant(lib_, spec, _run, w, x, m, n, nb * QK_K, (2, 3, 4, 11))
    # rows do not interact: computing the rows one at a time gives the same outputs
    assert_rows_independent(lib_, spec, _run, "ref", w, x, m, n, nb * QK_K, nth=2, whole=want)


@pytest.mark.model
def test_linear_q6_k_ggml_ref_matches_ggml_order_on_model_rows(lib, model_path):
    lib_, spec = lib
    rng = np.random.default_rng(3)
    for name, k, data in model_tensors(model_path, "q6_k"):
        rows = np.ascontiguousarray(data[:: data.shape[0] // 40][:40])
        n = rows.shape[0]
        xf, x = activations(3, k, rng, 0.5)
        assert_ref_matches(lib_, spec, _run, linear_q6_k(xf, rows), rows, x, 3, n, k, nth=2,
                           context=f"tensor={name} K={k} rows={n}", variants=simd_variants(spec))
