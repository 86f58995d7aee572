"""Differential tests for the linears that read a repacked weight layout ("q32_r8", weights/repack.py).

linear_<w>_<a>_ggml_r8 computes contract linear.<w>.<a>.ggml.v1 (llama.cpp's x86 orders: q4_0 and q5_0 against
q8_0 activations, q4_1 and q5_1 against q8_1; q4_0 with both of its orders, chosen by N % 8) on weights the packer
repacked. Each ref must equal the GGUF-layout provider's ref (linear_<w>_<a>_ggml, itself tested against the NumPy
statement of llama.cpp's order and llama.cpp's outputs) bit for bit on the same values: random weights with N on
both sides of the 8-row group (q4_0: N % 8 == 0 and != 0), 2..262 blocks (past 256 blocks the SIMD variants run
K in slices with parked accumulators), tiny and huge scales, extreme codes, M 1..3 (the decode loop) and 16..70 (the prefill GEMM on panels unpacked from the layout),
nth 1..3 (and more threads than groups); every SIMD variant (q4_0's amx too, on a host with AMX-INT8) must equal the ref the same way; q5_0 also on real rows of the Gemma 3 GGUF (the
default model has no q4_0, q4_1 or q5_1 tensors). The repacker itself is tested in tests/weights/test_repack.py.
"""

from __future__ import annotations

import numpy as np
import pytest
from kernel_harness import (
    assert_close_or_equal,
    bind,
    load_map_library,
    map_variants,
    runnable_variants,
    skip_unless_runnable,
)
from linear_ggml_harness import model_tensors, random_blocks, runner

from kernelmap.weights.repack import repack

FORMATS = ("q4_0", "q4_1", "q5_0", "q5_1")
ACT = {"q4_0": "q8_0", "q4_1": "q8_1", "q5_0": "q8_0", "q5_1": "q8_1"}
MAP_IDS = {"q4_0": "linear_q4_0_q8_0_ggml_r8", "q4_1": "linear_q4_1_q8_1_ggml_r8", "q5_0": "linear_q5_0_q8_0_ggml_r8",
           "q5_1": "linear_q5_1_q8_1_ggml_r8"}
GGML_MAP_IDS = {"q4_0": "linear_q4_0_q8_0_ggml", "q4_1": "linear_q4_1_q8_1_ggml", "q5_0": "linear_q5_0_q8_0_ggml",
                "q5_1": "linear_q5_1_q8_1_ggml"}
BLOCK = {"q4_0": 18, "q4_1": 20, "q5_0": 22, "q5_1": 24}
XBLOCK = {"q8_0": 34, "q8_1": 36}
SIMD = [(f, v) for f in FORMATS for v in map_variants(MAP_IDS[f], ref=False)]
# (M, N, blocks): N below, at and past one 8-row group and several groups with tails (N % 8 == 0: 8, 16, 40, 64, 24:
# q4_0's repacked order); blocks 2 (one tile) .. 130 in one K slice, 258..262 in two (the SIMD variants' KQR8_KS is
# 256 blocks)
SHAPES = [(1, 1, 2), (1, 7, 4), (1, 8, 20), (1, 9, 64), (1, 17, 6), (1, 40, 20), (1, 130, 64), (2, 5, 10),
          (3, 16, 12), (1, 3, 130), (1, 64, 128), (3, 25, 2), (1, 11, 258), (1, 16, 260), (2, 24, 262),
          # M >= 16: the prefill GEMM on panels unpacked from the layout (KQ32G_MIN_M 16; 32-block panel chunks, so
          # 34 and 66 blocks park accumulators between chunks; 70 rows: two 64-row super-tiles; N past 8- and
          # 16-column panels with tails; q5_0's AVX2 lane-outer tiles of 8 rows and their 4 / 2 / 1-row tails)
          (16, 8, 2), (17, 24, 64), (33, 37, 34), (23, 40, 4), (70, 130, 66), (16, 16, 96),
          # q4_0's repacked order on AMX tiles (the amx variant: rows in tiles of 16, 1-15 tail rows on the VNNI
          # tiles): three tiles over a parked 2-block chunk, a 64-row super-tile of 4 tiles and a 6-row tail
          (48, 32, 34), (70, 64, 66), (40, 24, 6)]
_run = runner(w_offset=4, x_offset=38)  # weights: the ABI promises 4-byte alignment (KERNEL_ABI.md)


@pytest.fixture(scope="module")
def libs():
    return {f: (load_map_library(MAP_IDS[f]), load_map_library(GGML_MAP_IDS[f])) for f in FORMATS}


def random_weights(fmt: str, n: int, nb: int, rng: np.random.Generator, scale: float = 1e-2) -> np.ndarray:
    """Random weight blocks uint8 [n, nb * block]: random codes, finite f16 d (and m) of both signs, magnitude ~scale."""
    return random_blocks(n, nb, BLOCK[fmt], rng, scale=scale, d_offsets=(0, 2) if ACT[fmt] == "q8_1" else (0,),
                         signed=True)


def activations(fmt: str, m: int, nb: int, rng: np.random.Generator, scale: float = 1.0,
                qs: np.ndarray | None = None) -> np.ndarray:
    """Activation blocks uint8 [m, nb * block] of the format's type: random quants in [-127, 127] (or qs for every
    block), f16 d of both signs of magnitude ~scale; q8_1 also s = f16(d * sum(quants)), clamped to the finite f16
    range (the kernels read s as stored: any finite value tests them)."""
    quants = rng.integers(-127, 128, size=(m, nb, 32), dtype=np.int8) if qs is None else np.broadcast_to(
        qs.astype(np.int8), (m, nb, 32))
    d = (rng.uniform(0.1, 1.0, (m, nb)) * scale * np.where(rng.random((m, nb)) < 0.5, -1, 1)).astype(np.float16)
    x = np.zeros((m, nb, XBLOCK[ACT[fmt]]), np.uint8)
    x[:, :, 0:2] = d.view(np.uint8).reshape(m, nb, 2)
    if ACT[fmt] == "q8_1":
        s = np.clip(d.astype(np.float64) * quants.astype(np.int64).sum(-1), -65504, 65504).astype(np.float16)
        x[:, :, 2:4] = s.view(np.uint8).reshape(m, nb, 2)
    x[:, :, -32:] = quants.view(np.uint8)
    return x.reshape(m, -1)


def r8(fmt: str, w: np.ndarray, n: int, k: int) -> np.ndarray:
    return repack("q32_r8", fmt, np.ascontiguousarray(w).reshape(-1), (k, n))


def cases(fmt: str, rng: np.random.Generator):
    for m, n, nb in SHAPES:
        yield f"random_{m}x{n}x{nb}", m, n, nb, random_weights(fmt, n, nb, rng, float(rng.choice([1e-3, 1.0]))), \
            activations(fmt, m, nb, rng)
    m, nb = 2, 6
    alt = np.where(np.arange(32) % 2 == 0, 127, -127)
    for n in (11, 16):  # q4_0: both orders
        top = np.full((n, nb, BLOCK[fmt]), 0xFF, np.uint8)  # every code the largest (q5_0: 31, +15), d = 1
        top[:, :, 0:2] = np.array([0x3C00], np.uint16).view(np.uint8)
        if ACT[fmt] == "q8_1":
            top[:, :, 2:4] = np.array([0x3C00], np.uint16).view(np.uint8)  # m = 1
        low = top.copy()
        low[:, :, 4 if ACT[fmt] == "q8_1" else 2:] = 0  # every code 0 (q4_0: -8, q5_0: -16)
        yield f"extreme_codes_high_n{n}", m, n, nb, top.reshape(n, -1), activations(fmt, m, nb, rng, qs=alt)
        yield f"extreme_codes_low_n{n}", m, n, nb, low.reshape(n, -1), activations(fmt, m, nb, rng, qs=alt)
        # the largest block sums: every quant -127 against the extreme codes
        yield f"extreme_sums_n{n}", m, n, nb, top.reshape(n, -1), activations(fmt, m, nb, rng, qs=np.full(32, -127))
        yield f"large_magnitudes_n{n}", m, n, nb, random_weights(fmt, n, nb, rng, 6e4), \
            activations(fmt, m, nb, rng, 1e4)
        yield f"tiny_magnitudes_n{n}", m, n, nb, random_weights(fmt, n, nb, rng, 1e-7), \
            activations(fmt, m, nb, rng, 1e-6)
        yield f"zero_weights_n{n}", m, n, nb, np.zeros((n, nb * BLOCK[fmt]), np.uint8), activations(fmt, m, nb, rng)


@pytest.mark.parametrize("fmt", FORMATS)
def test_linear_q32_r8_ref_matches_ggml_layout_ref(libs, fmt):
    (lib, spec), (glib, gspec) = libs[fmt]
    ref, gref = bind(lib, spec, "ref"), bind(glib, gspec, "ref")
    for name, m, n, nb, w, x in cases(fmt, np.random.default_rng(21)):
        k = nb * 32
        want = _run(gref, w, x, m, n, k, 1)
        for nth in (1, 2, 3, n // 8 + 2):  # the last: more threads than groups (some get none)
            got = _run(ref, r8(fmt, w, n, k), x, m, n, k, nth, threaded=nth == 2)
            assert_close_or_equal(want, got, map_id=MAP_IDS[fmt], variant="ref", context=f"case={name} nth={nth}")


@pytest.mark.parametrize("fmt,variant", SIMD, ids=[f"{f}-{v}" for f, v in SIMD])
def test_linear_q32_r8_variants_match_ref(libs, fmt, variant):
    skip_unless_runnable(MAP_IDS[fmt], variant)
    (lib, spec), _ = libs[fmt]
    ref, fn = bind(lib, spec, "ref"), bind(lib, spec, variant)
    for name, m, n, nb, w, x in cases(fmt, np.random.default_rng(22)):
        k = nb * 32
        wr = r8(fmt, w, n, k)
        want = _run(ref, wr, x, m, n, k, 1)
        for nth in (1, 2, 3, n // 8 + 2):
            got = _run(fn, wr, x, m, n, k, nth, threaded=nth == 2)
            assert_close_or_equal(want, got, map_id=MAP_IDS[fmt], variant=variant, context=f"case={name} nth={nth}")


@pytest.mark.model
def test_linear_q32_r8_on_model_rows(libs, model_path):
    """Real q5_0 rows of the Gemma 3 file (the first and last q5_0 tensors, 36 rows each: 4 groups and a tail)."""
    (lib, spec), (glib, gspec) = libs["q5_0"]
    gref = bind(glib, gspec, "ref")
    names = runnable_variants(MAP_IDS["q5_0"])
    rng = np.random.default_rng(23)
    for tensor, k, data in model_tensors(model_path, "q5_0"):
        rows = np.ascontiguousarray(data[:: data.shape[0] // 36][:36])
        n, nb = rows.shape[0], k // 32
        x = activations("q5_0", 1, nb, rng, 0.02)
        want = _run(gref, rows, x, 1, n, k, 1)
        for v in names:
            got = _run(bind(lib, spec, v), r8("q5_0", rows, n, k), x, 1, n, k, 2)
            assert_close_or_equal(want, got, map_id=MAP_IDS["q5_0"], variant=v, context=f"tensor={tensor} K={k} N={n}")
