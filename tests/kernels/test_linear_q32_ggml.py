"""Differential tests for the 32-element ggml-order linears: q4_0, q5_0, q8_0 against q8_0 activations, q4_1, q5_1
against q8_1 (llama.cpp's x86 orders).

Contracts linear.<w>.<a>.ggml.v1: per 32-block 8 int32 lanes of 4 consecutive products, acc[l] = fma(f32(dw *
dx), lane, acc[l]) in block order, fold l+4, 0+2 / 1+3, 0+1; q4_1 / q5_1 add the chain fma(m, s) after the fold;
q4_0 with N % 8 == 0 is llama.cpp's repacked order (one fma chain of whole-block sums per column). Every SIMD
variant must be byte-identical to the ref (M 1..130 with tile tails, N tails on both sides of N % 8, 1..130
blocks incl. several K slices, tiny and huge scales, extreme codes, nth 1..3); the ref must equal the NumPy
statement of llama.cpp's order (tests/support/ggml_linear_orders.linear_q0 for q5_0 / q8_0,
tests/support/ggml_format_orders for the others, both checked against llama.cpp's own outputs) bit for bit,
on random weights and on real rows of the Gemma 3 GGUF; and the ref must not depend on (ith, nth).
"""

from __future__ import annotations

import ggml_format_orders as fo
import numpy as np
import pytest
from ggml_linear_orders import linear_q0
from kernel_harness import load_map_library, map_variants, skip_unless_runnable
from linear_ggml_harness import (
    assert_partition_invariant,
    assert_ref_matches,
    assert_rows_independent,
    assert_variants_match_ref,
    model_tensors,
    random_blocks,
    runner,
    simd_variants,
)

from kernelmap.reference import ops

ACT = {"q4_0": "q8_0", "q5_0": "q8_0", "q8_0": "q8_0", "q4_1": "q8_1", "q5_1": "q8_1"}
MAP_IDS = {"q4_0": "linear_q4_0_q8_0_ggml", "q5_0": "linear_q5_0_q8_0_ggml", "q8_0": "linear_q8_0_q8_0_ggml",
           "q4_1": "linear_q4_1_q8_1_ggml", "q5_1": "linear_q5_1_q8_1_ggml"}
FORMATS = sorted(MAP_IDS)
SIMD = [(fmt, v) for fmt in FORMATS for v in map_variants(MAP_IDS[fmt], ref=False)]
BLOCK = {w: fo.BLOCK[w] for w in ACT}
Q8_0_DTYPE = np.dtype([("d", "<f2"), ("qs", "i1", (32,))])

# (M, N, blocks): activation tiles of 16/8/4/2/1 (AVX-512) and 4/2/1 (AVX2) with every tail, N tails of
# the 4- and 8-column tiles, 1..130 blocks (block groups of 8 with tails; > 64 blocks = several K slices)
SHAPES = [(1, 1, 1), (1, 7, 3), (1, 13, 20), (1, 17, 9), (2, 5, 9), (3, 9, 11), (4, 3, 4), (5, 6, 16), (6, 5, 13),
          (7, 4, 15), (8, 9, 8), (9, 6, 10), (12, 3, 2), (15, 2, 7), (16, 11, 20), (17, 4, 5), (33, 3, 2),
          (130, 2, 3), (3, 5, 67), (9, 3, 130), (1, 9, 65), (18, 5, 70),
          (1, 8, 20), (1, 24, 67), (3, 16, 9), (17, 40, 5), (2, 136, 64),  # N % 8 == 0: q4_0's repacked order
          # the AVX-512 VNNI prefill GEMM (M >= 16, linear/q32_gemm_body.h): 16-column groups with 8- and odd
          # tails, panels of 32 blocks and their tails (33, 65 blocks: accumulators parked between panels),
          # the 64-row super-tile of a several-panel K crossed (M = 70, 131), both q4_0 orders; one panel: the
          # 128-row super-tile of the vec_dot order's seeds crossed (M = 130 above)
          (16, 32, 20), (21, 40, 32), (19, 37, 33), (16, 48, 65), (70, 19, 65), (70, 24, 40), (131, 21, 34),
          (64, 5, 1)]
_run = runner(w_offset=2, x_offset=38)


def random_weights(fmt: str, n: int, nb: int, rng: np.random.Generator, scale: float = 1e-2) -> np.ndarray:
    """Random weight blocks uint8 [n, nb * block]: random codes, finite f16 d (and m) of both signs, magnitude ~scale."""
    return random_blocks(n, nb, BLOCK[fmt], rng, scale=scale, d_offsets=(0, 2) if ACT[fmt] == "q8_1" else (0,),
                         signed=True)


def quantize(xf: np.ndarray, act: str = "q8_0") -> np.ndarray:
    """Activation blocks of f32 rows: q8_0 by ops.quantize_q8_0 rule x86 (structured [M, K/32]); q8_1 by
    ggml_format_orders.quantize_q8_1 (bytes [M, K/32 * 36]); both llama.cpp's x86 quantize_row rules."""
    if act == "q8_1":
        return fo.quantize_q8_1(xf)
    q = ops.quantize_q8_0(xf, "x86")
    m, k = xf.shape
    out = np.zeros((m, k // 32), Q8_0_DTYPE)
    out["d"] = q.d.reshape(m, -1).astype(np.float16)
    out["qs"] = q.qs.reshape(m, -1, 32)
    return out


def activations(m: int, k: int, rng: np.random.Generator, scale: float = 1.0,
                act: str = "q8_0") -> tuple[np.ndarray, np.ndarray]:
    xf = (rng.standard_normal((m, k)) * scale).astype(np.float32)
    return xf, quantize(xf, act)


def oracle(xf: np.ndarray, w: np.ndarray, fmt: str) -> np.ndarray:
    """llama.cpp's x86 order for weights w of fmt on activation rows xf (quantized by the format's rule)."""
    if fmt in ("q5_0", "q8_0"):
        return linear_q0(xf, w, fmt)
    xq = fo.quantize_q8_1(xf) if ACT[fmt] == "q8_1" else fo.quantize_q8_0(xf)
    if fmt == "q4_0" and w.shape[0] % 8 == 0:
        return fo.linear_q4_0_x8(xq, w)
    return fo.linear_q32(xq, w, fmt)


@pytest.fixture(scope="module")
def libs():
    return {fmt: load_map_library(MAP_IDS[fmt]) for fmt in FORMATS}


def _with_quants(x: np.ndarray, qs: np.ndarray, act: str) -> np.ndarray:
    """A copy of activation blocks x (of type act) whose every block's 32 quants are qs (scales kept)."""
    out = x.copy()
    if act == "q8_1":
        out.reshape(x.shape[0], -1, 36)[:, :, 4:] = qs.view(np.uint8)
    else:
        out["qs"] = qs
    return out


def _edge_cases(fmt: str, rng: np.random.Generator):
    m, n, nb = 17, 6, 11  # 17 rows: a 16-row prefill tile (AMX's tile path) and a 1-row tail
    k = nb * 32
    act = ACT[fmt]
    _, x = activations(m, k, rng, act=act)
    yield "zero_activations", m, n, k, random_weights(fmt, n, nb, rng), quantize(np.zeros((m, k), np.float32), act)
    yield "zero_weights", m, n, k, np.zeros((n, nb * BLOCK[fmt]), np.uint8), x
    top = np.full((n, nb, BLOCK[fmt]), 0xFF, np.uint8)  # nibble formats: every code the largest; q8_0: every weight -1
    top[:, :, 0:2] = np.array([0x3C00], np.uint16).view(np.uint8)  # d = 1 (and m = 1)
    if act == "q8_1":
        top[:, :, 2:4] = np.array([0x3C00], np.uint16).view(np.uint8)
    low = top.copy()
    low[:, :, 4 if act == "q8_1" else 2:] = 0x80 if fmt == "q8_0" else 0x00  # code 0; q8_0: every weight -128
    xs = _with_quants(x, np.where(np.arange(32) % 2 == 0, 127, -127).astype(np.int8), act)
    yield "extreme_codes_high", m, n, k, top.reshape(n, -1), xs
    yield "extreme_codes_low", m, n, k, low.reshape(n, -1), xs
    yield "large_magnitudes", m, n, k, random_weights(fmt, n, nb, rng, scale=6e4), activations(m, k, rng, 1e4, act)[1]
    yield "tiny_magnitudes", m, n, k, random_weights(fmt, n, nb, rng, scale=1e-7), activations(m, k, rng, 1e-6, act)[1]
    # extreme codes against all-(-127) quants and huge scales through the prefill GEMM with N % 8 == 0 (q4_0's
    # repacked order), two panels and a 16-column group with an 8-column tail
    mg, ng, nbg = 20, 24, 40
    kg = nbg * 32
    xg = _with_quants(activations(mg, kg, rng, act=act)[1], np.full(32, -127, np.int8), act)  # largest lane sums
    topg = np.resize(top[:1, :1], (ng, nbg, BLOCK[fmt]))
    lowg = np.resize(low[:1, :1], (ng, nbg, BLOCK[fmt]))
    yield "extreme_codes_high_gemm", mg, ng, kg, topg.reshape(ng, -1), xg
    yield "extreme_codes_low_gemm", mg, ng, kg, lowg.reshape(ng, -1), xg
    yield "large_magnitudes_gemm", mg, ng, kg, random_weights(fmt, ng, nbg, rng, scale=6e4), activations(mg, kg, rng, 1e4, act)[1]


@pytest.mark.parametrize("fmt,variant", SIMD, ids=[f"{f}-{v}" for f, v in SIMD])
def test_linear_q32_ggml_variants_match_ref(libs, fmt, variant):
    lib, spec = libs[fmt]
    skip_unless_runnable(MAP_IDS[fmt], variant)
    variants = [variant]
    rng = np.random.default_rng(11)
    cases = [(f"random_{m}x{n}x{nb}", m, n, nb * 32, random_weights(fmt, n, nb, rng, scale=float(rng.choice([1e-3, 1.0]))),
              activations(m, nb * 32, rng, act=ACT[fmt])[1]) for m, n, nb in SHAPES]
    cases += list(_edge_cases(fmt, rng))
    assert_variants_match_ref(lib, spec, _run, cases, variants)


@pytest.mark.parametrize("fmt", FORMATS)
def test_linear_q32_ggml_variants_match_ref_on_model_shapes(libs, fmt):
    """K = 640 and 2048 (one K slice) with N tails of the chunk of 256 columns, M = 1, 16, 21."""
    lib, spec = libs[fmt]
    rng = np.random.default_rng(12)
    cases = []
    for m, n, nb in ((1, 262, 20), (16, 259, 20), (21, 37, 64), (1, 256, 20), (16, 264, 64)):
        w, x = random_weights(fmt, n, nb, rng), activations(m, nb * 32, rng, act=ACT[fmt])[1]
        cases.append(("model_shape", m, n, nb * 32, w, x))
    assert_variants_match_ref(lib, spec, _run, cases, simd_variants(spec), nths=(2,), threaded_nth=None)


@pytest.mark.parametrize("fmt", FORMATS)
def test_linear_q32_ggml_ref_matches_numpy_oracle(libs, fmt):
    lib, spec = libs[fmt]
    rng = np.random.default_rng(13)
    for m, n, nb, wscale, xscale in ((1, 5, 1, 1e-2, 1.0), (3, 7, 9, 1.0, 10.0), (2, 4, 20, 6e4, 1e3),
                                     (4, 3, 13, 1e-6, 1e-3), (1, 6, 64, 1e-2, 1.0)):
        for nn in (n, 8 * n):  # q4_0: both orders
            xf, x = activations(m, nb * 32, rng, xscale, ACT[fmt])
            w = random_weights(fmt, nn, nb, rng, wscale)
            assert_ref_matches(lib, spec, _run, oracle(xf, w, fmt), w, x, m, nn, nb * 32, nth=2,
                               context=f"numpy oracle M={m} N={nn} K={nb * 32}")


@pytest.mark.parametrize("fmt", FORMATS)
def test_linear_q32_ggml_ref_is_partition_invariant(libs, fmt):
    lib, spec = libs[fmt]
    rng = np.random.default_rng(14)
    for m, n, nb in ((3, 11, 6), (3, 24, 6)):
        w, x = random_weights(fmt, n, nb, rng), activations(m, nb * 32, rng, act=ACT[fmt])[1]
        assert_partition_invariant(lib, spec, _run, w, x, m, n, nb * 32, (2, 3, 5, 11, 16))
        for variant in simd_variants(spec):  # and the SIMD variants do not depend on M either
            assert_rows_independent(lib, spec, _run, variant, w, x, m, n, nb * 32, nth=1)


@pytest.mark.model
@pytest.mark.parametrize("fmt", ["q5_0", "q8_0"])  # the types the default model has (the others: the format fixtures)
def test_linear_q32_ggml_ref_matches_numpy_on_model_rows(libs, fmt, model_path):
    lib, spec = libs[fmt]
    rng = np.random.default_rng(15)
    for name, k, data in model_tensors(model_path, fmt):
        rows = np.ascontiguousarray(data[:: data.shape[0] // 24][:24])
        n = rows.shape[0]
        xf, x = activations(3, k, rng, 0.5)
        assert_ref_matches(lib, spec, _run, linear_q0(xf, rows, fmt), rows, x, 3, n, k, nth=2,
                           context=f"tensor={name} K={k} rows={n}", variants=simd_variants(spec))
