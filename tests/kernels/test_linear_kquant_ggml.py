"""Differential tests for linear_q2_k / q3_k / q5_k _q8_k_ggml (contracts linear.<t>.q8_k.ggml.v1: llama.cpp's x86 order)
and linear_q2_k_q8_k_ggml_vecdot (linear.q2_k.q8_k.ggml_vecdot.v1: its AVX2 build's q2_K).

q2_K follows llama.cpp's repacked 8x8 gemv/gemm order (the q4_K shape) for weights of N % 8 == 0 rows and its
vec_dot order otherwise (llama.cpp repacks only those), q3_K and q5_K its vec_dot order (the q6_K shape, q5_K
with its f32 min chain); q2_k_vecdot takes the vec_dot order at every N (the AVX2 build never repacks q2_K). Every SIMD variant this host runs must be byte-identical
to the ref (M 1..130 across the row tiles and their tails, N across the 8-column groups and the column
chunks, 1..11 superblocks, tiny and huge scales, extreme codes, nth 1..4, threads); the ref must equal
the NumPy statement of llama.cpp's order (tests/support/ggml_linear_orders) bit for bit; and the ref
must not depend on (ith, nth) or on the other rows.
"""

from __future__ import annotations

import numpy as np
import pytest
from ggml_linear_orders import linear_q2_k, linear_q2_k_vec_dot, linear_q3_k, linear_q5_k
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
    pack_q8_k,
    random_blocks,
    runner,
    simd_variants,
)

# the weight type of each tested provider; q2_k_vecdot: the AVX2 build's q2_K (vec_dot order at every N)
TYPES = ["q2_k", "q2_k_vecdot", "q3_k", "q5_k"]
BLOCK = {"q2_k": 84, "q2_k_vecdot": 84, "q3_k": 110, "q5_k": 176}
D_OFFSETS = {"q2_k": (80, 82), "q2_k_vecdot": (80, 82), "q3_k": (108,), "q5_k": (0, 2)}
ORACLE = {"q2_k": linear_q2_k, "q2_k_vecdot": linear_q2_k_vec_dot, "q3_k": linear_q3_k, "q5_k": linear_q5_k}

# (M, N, superblocks): row tiles of 8/4/2/1 and their tails, N across 8-column groups and their tails,
# 1..11 superblocks; the last three cross the vec_dot variants' 64 KiB column chunks
SHAPES = [(1, 1, 1), (1, 7, 3), (2, 5, 9), (3, 4, 8), (4, 9, 4), (5, 13, 2), (7, 6, 1), (8, 16, 8), (9, 6, 10),
          (12, 3, 2), (15, 17, 3), (16, 7, 8), (17, 4, 5), (33, 3, 2), (130, 2, 8), (1, 64, 11), (19, 40, 11),
          (14, 390, 2),
          # the prefill GEMM of q2_K (N % 8 == 0) and q5_K (M >= 16): 16-column groups and short tails, panels of
          # 8 superblocks and their tail, the super-tiles (KQG_FA 1152: q5_K 128 rows, q3_K 144, q2_K 576) and the
          # row-tile tails
          (16, 32, 9), (70, 24, 5), (150, 48, 12), (580, 16, 1)]
_run = runner(w_offset=2, x_offset=36)  # weights: 2-byte alignment only


MAP_IDS = {"q2_k": "linear_q2_k_q8_k_ggml", "q2_k_vecdot": "linear_q2_k_q8_k_ggml_vecdot", "q3_k": "linear_q3_k_q8_k_ggml",
           "q5_k": "linear_q5_k_q8_k_ggml"}


def map_id(t: str) -> str:
    return MAP_IDS[t]


def random_weights(t: str, n: int, nb: int, rng: np.random.Generator, scale: float = 1e-2) -> np.ndarray:
    """Random blocks uint8 [n, nb * block]: every code, scale and min byte random, finite signed f16 d
    (and dmin) of magnitude ~scale."""
    return random_blocks(n, nb, BLOCK[t], rng, scale=scale, d_offsets=D_OFFSETS[t], signed=True)


def activations(m: int, k: int, rng: np.random.Generator, scale: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    xf = (rng.standard_normal((m, k)) * scale).astype(np.float32)
    return xf, pack_q8_k(xf)


@pytest.fixture(scope="module")
def libs():
    return {t: load_map_library(map_id(t)) for t in TYPES}


def _edge_cases(t: str, rng: np.random.Generator, m: int = 6, n: int = 11):
    nb = 9
    k = nb * QK_K
    _, x = activations(m, k, rng)
    yield "zero_activations", m, n, k, random_weights(t, n, nb, rng), pack_q8_k(np.zeros((m, k), np.float32))
    yield "zero_weights", m, n, k, np.zeros((n, nb * BLOCK[t]), np.uint8), x
    top = np.full((n, nb, BLOCK[t]), 0xFF, np.uint8)  # every code, scale and min at its largest
    for off in D_OFFSETS[t]:
        top[:, :, off:off + 2] = np.array([0x3C00], np.uint16).view(np.uint8)  # d = dmin = 1
    low = np.zeros_like(top)  # codes 0 (q3_K: -4), scales 0 (q3_K: -32)
    for off in D_OFFSETS[t]:
        low[:, :, off:off + 2] = top[:, :, off:off + 2]
    xs = x.copy()
    xs["qs"] = np.where(np.arange(QK_K) % 2 == 0, 127, -127).astype(np.int8)
    xs["bsums"] = xs["qs"].reshape(m, nb, 16, 16).astype(np.int16).sum(-1)
    yield "extreme_codes_high", m, n, k, top.reshape(n, -1), xs
    yield "extreme_codes_low", m, n, k, low.reshape(n, -1), xs
    yield "large_magnitudes", m, n, k, random_weights(t, n, nb, rng, scale=6e4), activations(m, k, rng, 1e30)[1]
    yield "tiny_magnitudes", m, n, k, random_weights(t, n, nb, rng, scale=1e-7), activations(m, k, rng, 1e-30)[1]
    yield "no_blocks", m, n, 0, np.zeros((n, 0), np.uint8), np.zeros((m, 0), Q8_K_DTYPE)


# every (type, non-ref variant) the registry declares
TYPE_VARIANTS = [(t, v) for t in TYPES for v in map_variants(map_id(t), ref=False)]


@pytest.mark.parametrize("t,variant", TYPE_VARIANTS, ids=[f"{t}-{v}" for t, v in TYPE_VARIANTS])
def test_linear_kquant_ggml_variants_match_ref(libs, t, variant):
    skip_unless_runnable(map_id(t), variant)
    lib, spec = libs[t]
    rng = np.random.default_rng([TYPES.index(t), 5])
    cases = [(f"random_{m}x{n}x{nb}", m, n, nb * QK_K, random_weights(t, n, nb, rng), activations(m, nb * QK_K, rng)[1])
             for m, n, nb in SHAPES]
    gemm = [(name + "_gemm", *rest) for name, *rest in _edge_cases(t, rng, m=20, n=24)]  # M >= 16, N % 8 == 0
    cases += gemm[:-1] + list(_edge_cases(t, rng))
    assert_variants_match_ref(lib, spec, _run, cases, [variant], nths=(1, 2, 3, 4), threaded_nth=2)
    name, m, n, k, w, x = cases[-1]
    assert name == "no_blocks" and k == 0
    assert_ref_matches(lib, spec, _run, np.zeros((m, n), np.float32), w, x, m, n, k, nth=1,
                       context="K = 0 must give +0.0 everywhere")


@RANDOM_SHAPE_SETTINGS
@pytest.mark.parametrize("t", TYPES)
@given(m=st.integers(1, 20), n=st.integers(1, 20), nb=st.integers(1, 9), nth=st.integers(1, 4), **RANDOM_SCALES)
def test_linear_kquant_ggml_variants_match_ref_on_random_shapes(libs, t, m, n, nb, nth, seed, wscale, xscale):
    lib, spec = libs[t]
    rng = np.random.default_rng(seed)
    k = nb * QK_K
    w = random_weights(t, n, nb, rng, scale=wscale)
    _, x = activations(m, k, rng, xscale)
    assert_variants_match_ref(lib, spec, _run, [(f"seed={seed}", m, n, k, w, x)], simd_variants(spec),
                              nths=(nth,), threaded_nth=None)


@pytest.mark.parametrize("t", TYPES)
@pytest.mark.parametrize("shape", [(1, 9, 1), (3, 8, 8), (5, 4, 11), (2, 33, 3), (4, 16, 2)],
                         ids=lambda s: "x".join(map(str, s)))
def test_linear_kquant_ggml_ref_matches_ggml_order(libs, t, shape):
    assert "ref" in map_variants(map_id(t))
    lib, spec = libs[t]
    m, n, nb = shape
    rng = np.random.default_rng([TYPES.index(t), *shape])
    k = nb * QK_K
    w = random_weights(t, n, nb, rng, scale=0.05)
    xf, x = activations(m, k, rng)
    assert_ref_matches(lib, spec, _run, ORACLE[t](xf, w), w, x, m, n, k, nth=2,
                       context=f"vs ggml_linear_orders ({t}) M={m} N={n} K={k}", variants=simd_variants(spec))


@pytest.mark.parametrize("t", TYPES)
def test_linear_kquant_ggml_ref_is_partition_invariant(libs, t):
    lib, spec = libs[t]
    rng = np.random.default_rng([TYPES.index(t), 11])
    m, n, nb = 3, 19, 3
    w = random_weights(t, n, nb, rng)
    _, x = activations(m, nb * QK_K, rng)
    want = assert_partition_invariant(lib, spec, _run, w, x, m, n, nb * QK_K, (2, 3, 4, 11, 19, 23))
    assert_rows_independent(lib, spec, _run, "ref", w, x, m, n, nb * QK_K, nth=2, whole=want)
