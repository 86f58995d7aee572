"""Differential tests for the decode GEMVs that read a repacked weight layout ("q32_r8", weights/repack.py).

linear_q5_0_q8_0_ggml_r8 computes contract linear.q5_0.q8_0.ggml.v1 (llama.cpp's x86 q5_0 order) on weights the
packer repacked. Its ref must equal the GGUF-layout provider's ref (linear_q5_0_q8_0_ggml, itself tested against
the NumPy statement of llama.cpp's order and llama.cpp's outputs) bit for bit on the same values: random weights
with N on both sides of the 8-row group, 2..130 blocks, tiny and huge scales, extreme codes, M 1..3, nth 1..3
(and more threads than groups); every SIMD variant must equal the ref the same way; both on real q5_0 rows of the
Gemma 3 GGUF. The repacker itself is tested in tests/weights/test_repack.py.
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

MAP_ID = "linear_q5_0_q8_0_ggml_r8"
GGML_MAP_ID = "linear_q5_0_q8_0_ggml"
BLOCK = 22
Q8_0_DTYPE = np.dtype([("d", "<f2"), ("qs", "i1", (32,))])
SIMD = map_variants(MAP_ID, ref=False)
# (M, N, blocks): N below, at and past one 8-row group and several groups with tails; blocks 2 (one tile) .. 130
SHAPES = [(1, 1, 2), (1, 7, 4), (1, 8, 20), (1, 9, 64), (1, 17, 6), (1, 40, 20), (1, 130, 64), (2, 5, 10),
          (3, 16, 12), (1, 3, 130), (1, 64, 128), (3, 25, 2)]
_run = runner(w_offset=4, x_offset=38)  # weights: the ABI promises 4-byte alignment (KERNEL_ABI.md)


@pytest.fixture(scope="module")
def libs():
    return load_map_library(MAP_ID), load_map_library(GGML_MAP_ID)


def random_weights(n: int, nb: int, rng: np.random.Generator, scale: float = 1e-2) -> np.ndarray:
    return random_blocks(n, nb, BLOCK, rng, scale=scale, d_offsets=(0,), signed=True)


def activations(m: int, nb: int, rng: np.random.Generator, scale: float = 1.0) -> np.ndarray:
    """q8_0 activation blocks [m, nb]: random quants in [-127, 127], f16 d of both signs of magnitude ~scale."""
    x = np.zeros((m, nb), Q8_0_DTYPE)
    x["qs"] = rng.integers(-127, 128, size=(m, nb, 32), dtype=np.int8)
    x["d"] = (rng.uniform(0.1, 1.0, (m, nb)) * scale * np.where(rng.random((m, nb)) < 0.5, -1, 1)).astype(np.float16)
    return x


def r8(w: np.ndarray, n: int, k: int) -> np.ndarray:
    return repack("q32_r8", "q5_0", np.ascontiguousarray(w).reshape(-1), (k, n))


def cases(rng: np.random.Generator):
    for m, n, nb in SHAPES:
        yield f"random_{m}x{n}x{nb}", m, n, nb, random_weights(n, nb, rng, float(rng.choice([1e-3, 1.0]))), \
            activations(m, nb, rng)
    m, n, nb = 2, 11, 6
    x = activations(m, nb, rng)
    top = np.full((n, nb, BLOCK), 0xFF, np.uint8)  # every code 31 (+15), d = 1
    top[:, :, 0:2] = np.array([0x3C00], np.uint16).view(np.uint8).reshape(1, 1, 2)
    low = top.copy()
    low[:, :, 2:] = 0  # every code 0 (-16)
    xs = x.copy()
    xs["qs"] = np.where(np.arange(32) % 2 == 0, 127, -127).astype(np.int8)
    yield "extreme_codes_high", m, n, nb, top.reshape(n, -1), xs
    yield "extreme_codes_low", m, n, nb, low.reshape(n, -1), xs
    yield "large_magnitudes", m, n, nb, random_weights(n, nb, rng, 6e4), activations(m, nb, rng, 1e4)
    yield "tiny_magnitudes", m, n, nb, random_weights(n, nb, rng, 1e-7), activations(m, nb, rng, 1e-6)
    yield "zero_weights", m, n, nb, np.zeros((n, nb * BLOCK), np.uint8), x


def test_linear_q32_r8_ref_matches_ggml_layout_ref(libs):
    (lib, spec), (glib, gspec) = libs
    ref, gref = bind(lib, spec, "ref"), bind(glib, gspec, "ref")
    for name, m, n, nb, w, x in cases(np.random.default_rng(21)):
        k = nb * 32
        want = _run(gref, w, x, m, n, k, 1)
        for nth in (1, 2, 3, n // 8 + 2):  # the last: more threads than groups (some get none)
            got = _run(ref, r8(w, n, k), x, m, n, k, nth, threaded=nth == 2)
            assert_close_or_equal(want, got, map_id=MAP_ID, variant="ref", context=f"case={name} nth={nth}")


@pytest.mark.parametrize("variant", SIMD)
def test_linear_q32_r8_variants_match_ref(libs, variant):
    skip_unless_runnable(MAP_ID, variant)
    (lib, spec), _ = libs
    ref, fn = bind(lib, spec, "ref"), bind(lib, spec, variant)
    for name, m, n, nb, w, x in cases(np.random.default_rng(22)):
        k = nb * 32
        wr = r8(w, n, k)
        want = _run(ref, wr, x, m, n, k, 1)
        for nth in (1, 2, 3, n // 8 + 2):
            got = _run(fn, wr, x, m, n, k, nth, threaded=nth == 2)
            assert_close_or_equal(want, got, map_id=MAP_ID, variant=variant, context=f"case={name} nth={nth}")


@pytest.mark.model
def test_linear_q32_r8_on_model_rows(libs, model_path):
    """Real q5_0 rows of the Gemma 3 file (the first and last q5_0 tensors, 36 rows each: 4 groups and a tail)."""
    (lib, spec), (glib, gspec) = libs
    gref = bind(glib, gspec, "ref")
    names = runnable_variants(MAP_ID)
    rng = np.random.default_rng(23)
    for tensor, k, data in model_tensors(model_path, "q5_0"):
        rows = np.ascontiguousarray(data[:: data.shape[0] // 36][:36])
        n, nb = rows.shape[0], k // 32
        x = activations(1, nb, rng, 0.02)
        want = _run(gref, rows, x, 1, n, k, 1)
        for v in names:
            got = _run(bind(lib, spec, v), r8(rows, n, k), x, 1, n, k, 2)
            assert_close_or_equal(want, got, map_id=MAP_ID, variant=v, context=f"tensor={tensor} K={k} N={n}")

