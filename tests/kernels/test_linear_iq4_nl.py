"""The iq4_nl linear (contract linear.iq4_nl.q8_0.ggml.v1, map linear_iq4_nl_q8_0_ggml) against llama.cpp.

llama.cpp 0.3.36 computes an iq4_nl matmul in one of two orders, by the weight's row count N (its AVX-512 and AVX2
builds alike): N % 8 == 0 repacks the weight and runs ggml_gemv_iq4_nl_8x8_q8_0 (one fma chain of whole-block sums
per output), any other N runs ggml_vec_dot_iq4_nl_q8_0 (8 lanes, even and odd blocks in two accumulators, an odd last
block after the fold). tests/fixtures/formats/iq4_nl_ops.npz holds llama.cpp's own outputs of both on random data
(make_iq4_nl_fixtures.py: block counts 1..67, odd and even); the ref must give them bit for bit, equal the NumPy
statement (tests/support/ggml_format_orders.linear_iq4_nl) on more shapes and magnitudes, and not depend on (ith, nth)
or M; every SIMD variant must equal the ref over tile tails, both orders, extreme values and thread splits.
"""

from __future__ import annotations

from pathlib import Path

import ggml_format_orders as fo
import numpy as np
import pytest
from kernel_harness import bind, load_map_library, map_variants, skip_unless_runnable
from linear_ggml_harness import (
    assert_partition_invariant,
    assert_ref_matches,
    assert_rows_independent,
    assert_variants_match_ref,
    random_blocks,
    runner,
    simd_variants,
)

MAP_ID = "linear_iq4_nl_q8_0_ggml"
MAP_C16 = "linear_iq4_nl_q8_0_ggml_c16"  # the same contract on weights repacked into "iq4_nl_c16"
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "formats" / "iq4_nl_ops.npz"
BLOCKS = (1, 2, 3, 7, 20, 64, 67)
SIMD = map_variants(MAP_ID, ref=False)
SIMD_C16 = map_variants(MAP_C16, ref=False)
# (M, N, blocks): both orders (N % 8 == 0 or not), 16-column groups with 8-column and odd tails, 1-row decode and
# prefill tiles with tails, odd block counts (the vec_dot order's tail), K up to 130 blocks
SHAPES = [(1, 1, 1), (1, 7, 3), (1, 8, 1), (1, 16, 20), (1, 24, 67), (2, 5, 9), (3, 40, 11), (4, 13, 4), (5, 32, 16),
          (7, 8, 15), (9, 48, 10), (16, 16, 20), (17, 24, 5), (19, 37, 33), (21, 40, 64), (33, 56, 2), (70, 24, 40),
          (130, 8, 3), (3, 16, 130), (16, 264, 20), (1, 262, 20)]
_run = runner(w_offset=2, x_offset=38)
_run16 = runner(w_offset=4, x_offset=38)  # "iq4_nl_c16": the ABI promises weights 4-byte alignment (KERNEL_ABI.md)


def weights(n: int, nb: int, rng: np.random.Generator, scale: float = 1e-2) -> np.ndarray:
    return random_blocks(n, nb, 18, rng, scale=scale, d_offsets=(0,), signed=True)


def activations(m: int, k: int, rng: np.random.Generator, scale: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    xf = (rng.standard_normal((m, k)) * scale).astype(np.float32)
    return xf, fo.quantize_q8_0(xf)


@pytest.fixture(scope="module")
def lib():
    return load_map_library(MAP_ID)


@pytest.fixture(scope="module")
def lib16():
    return load_map_library(MAP_C16)


def c16(w: np.ndarray, n: int, k: int) -> np.ndarray:
    from kernelmap.weights.repack import repack

    return repack("iq4_nl_c16", "iq4_nl", np.ascontiguousarray(w).reshape(-1), (k, n))


@pytest.fixture(scope="module")
def fixtures():
    return np.load(FIXTURES)


def test_iq4_nl_value_table_is_llamas(fixtures):
    """The 16 values the kernels' table holds (km_iq4_nl_values, IQ4_NL_VALUES) are what dequantize_row_iq4_nl gives."""
    assert fixtures["dequantize/table"].astype(np.int32).tolist() == fo.IQ4_NL_VALUES.tolist()
    w, y = fixtures["dequantize:w"], fixtures["dequantize:y"]
    d, v = fo.unpack_iq4_nl(w)
    want = (d[..., None] * v.astype(np.float32)).astype(np.float32).reshape(y.shape)
    assert np.array_equal(want.view(np.uint32), y.view(np.uint32))


@pytest.mark.parametrize("kind", ["vec_dot", "gemv_8x8"])
def test_linear_iq4_nl_ref_gives_llama_outputs(lib, fixtures, kind):
    """llama.cpp's own outputs (vec_dot: 7 rows, the N % 8 != 0 order; gemv_8x8: 24 rows, the repacked order), the
    ref (split over 2 threads) and every SIMD variant this host runs, bit for bit; the NumPy statement too."""
    lib_, spec = lib
    for nb in BLOCKS:
        key = f"{kind}/{nb}"
        w, xq, want = fixtures[f"{key}:w"], fixtures[f"{key}:xq"], fixtures[f"{key}:y"]
        m, n = want.shape
        assert np.array_equal(fo.linear_iq4_nl(xq, w).view(np.uint32), want.view(np.uint32)), key
        assert_ref_matches(lib_, spec, _run, want, w, xq, m, n, nb * 32, nth=2, context=f"llama.cpp {key}",
                           variants=simd_variants(spec))


def test_linear_iq4_nl_ref_matches_numpy_oracle(lib):
    lib_, spec = lib
    rng = np.random.default_rng(31)
    for m, n, nb, wscale, xscale in ((1, 5, 1, 1e-2, 1.0), (3, 7, 9, 1.0, 10.0), (2, 4, 20, 6e4, 1e3),
                                     (4, 3, 13, 1e-6, 1e-3), (1, 6, 64, 1e-2, 1.0), (2, 5, 67, 1e-2, 1.0)):
        for nn in (n, 8 * n):  # both orders
            xf, x = activations(m, nb * 32, rng, xscale)
            w = weights(nn, nb, rng, wscale)
            assert_ref_matches(lib_, spec, _run, fo.linear_iq4_nl(x, w), w, x, m, nn, nb * 32, nth=2,
                               context=f"numpy oracle M={m} N={nn} K={nb * 32}")


def test_linear_iq4_nl_ref_is_partition_invariant(lib):
    lib_, spec = lib
    rng = np.random.default_rng(32)
    for m, n, nb in ((3, 11, 7), (3, 24, 6)):
        w, x = weights(n, nb, rng), activations(m, nb * 32, rng)[1]
        assert_partition_invariant(lib_, spec, _run, w, x, m, n, nb * 32, (2, 3, 5, 11, 16))
        for variant in ["ref", *simd_variants(spec)]:
            assert_rows_independent(lib_, spec, _run, variant, w, x, m, n, nb * 32, nth=2)


def _edge_cases(rng: np.random.Generator):
    m, n, nb = 17, 24, 11
    k = nb * 32
    x = activations(m, k, rng)[1]
    yield "zero_activations", m, n, k, weights(n, nb, rng), fo.quantize_q8_0(np.zeros((m, k), np.float32))
    yield "zero_weights", m, n, k, np.zeros((n, nb * 18), np.uint8), x
    one = np.array([0x3C00], np.uint16).view(np.uint8)
    lo = np.zeros((n, nb, 18), np.uint8)  # every value -127 (nibble 0), d = 1
    lo[:, :, 0:2] = one
    hi = np.full((n, nb, 18), 0xFF, np.uint8)  # every value 113 (nibble 15)
    hi[:, :, 0:2] = one
    xs = x.reshape(m, nb, 34).copy()
    xs[:, :, 2:] = np.where(np.arange(32) % 2 == 0, 127, -127).astype(np.int8).view(np.uint8)
    xneg = x.reshape(m, nb, 34).copy()
    xneg[:, :, 2:] = np.int8(-127).view(np.uint8)  # with value -127 everywhere: the largest block sum, 32 * 127^2
    for name, w in (("lowest_values", lo), ("highest_values", hi)):
        for xname, xx in (("alternating", xs), ("all_minus_127", xneg)):
            yield f"{name}_{xname}", m, n, k, w.reshape(n, -1), xx.reshape(m, -1)
            yield f"{name}_{xname}_vecdot", m, 7, k, w[:7].reshape(7, -1), xx.reshape(m, -1)
    yield "large_magnitudes", m, n, k, weights(n, nb, rng, 6e4), activations(m, k, rng, 1e4)[1]
    yield "tiny_magnitudes", m, n, k, weights(n, nb, rng, 1e-7), activations(m, k, rng, 1e-6)[1]


@pytest.mark.parametrize("variant", SIMD)
def test_linear_iq4_nl_variants_match_ref(lib, variant):
    lib_, spec = lib
    skip_unless_runnable(MAP_ID, variant)
    rng = np.random.default_rng(33)
    cases = [(f"random_{m}x{n}x{nb}", m, n, nb * 32, weights(n, nb, rng, float(rng.choice([1e-3, 1.0]))),
              activations(m, nb * 32, rng)[1]) for m, n, nb in SHAPES]
    cases += list(_edge_cases(rng))
    assert_variants_match_ref(lib_, spec, _run, cases, [variant])


def test_linear_iq4_nl_c16_ref_equals_the_gguf_ref(lib, lib16, fixtures):
    """The "iq4_nl_c16" ref on repacked weights gives the GGUF-layout ref's bits (both orders, odd block counts, pad
    rows of the last 16-row group) and llama.cpp's own outputs (the fixtures, repacked); split over threads too."""
    (glib, gspec), (clib, cspec) = lib, lib16
    rng = np.random.default_rng(34)
    for m, n, nb in ((1, 1, 1), (3, 7, 3), (2, 24, 20), (5, 40, 67), (17, 37, 9), (4, 16, 64)):
        w, x = weights(n, nb, rng), activations(m, nb * 32, rng)[1]
        want = _run(bind(glib, gspec, "ref"), w, x, m, n, nb * 32, 1)
        assert_ref_matches(clib, cspec, _run16, want, c16(w, n, nb * 32), x, m, n, nb * 32, nth=3,
                           context=f"c16 ref M={m} N={n} blocks={nb}")
    for kind in ("vec_dot", "gemv_8x8"):
        for nb in BLOCKS:
            key = f"{kind}/{nb}"
            w, xq, want = fixtures[f"{key}:w"], fixtures[f"{key}:xq"], fixtures[f"{key}:y"]
            m, n = want.shape
            assert_ref_matches(clib, cspec, _run16, want, c16(w, n, nb * 32), xq, m, n, nb * 32, nth=2,
                               context=f"c16 llama.cpp {key}", variants=simd_variants(cspec))


@pytest.mark.parametrize("variant", SIMD_C16)
def test_linear_iq4_nl_c16_variants_match_ref(lib16, variant):
    lib_, spec = lib16
    skip_unless_runnable(MAP_C16, variant)
    rng = np.random.default_rng(35)
    cases = [(f"random_{m}x{n}x{nb}", m, n, nb * 32, c16(weights(n, nb, rng, float(rng.choice([1e-3, 1.0]))), n, nb * 32),
              activations(m, nb * 32, rng)[1]) for m, n, nb in SHAPES]
    cases += [(name, m, n, k, c16(w, n, k), x) for name, m, n, k, w, x in _edge_cases(rng)]
    assert_variants_match_ref(lib_, spec, _run16, cases, [variant])
    for m, n, nb in ((3, 24, 6), (1, 40, 20)):  # rows alone give the whole run's bits
        w, x = c16(weights(n, nb, rng), n, nb * 32), activations(m, nb * 32, rng)[1]
        assert_rows_independent(lib_, spec, _run16, variant, w, x, m, n, nb * 32, nth=2)
