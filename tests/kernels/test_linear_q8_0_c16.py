"""Differential tests for the q8_0 linear that reads the repacked weight layout "q8_0_c16" (weights/repack.py).

linear_q8_0_q8_0_ggml_c16 computes contract linear.q8_0.q8_0.ggml.v1 (llama.cpp's x86 vec_dot_q8_0_q8_0 order) on
weights the packer repacked into 16-row groups. Its ref must equal the GGUF-layout provider's ref
(linear_q8_0_q8_0_ggml, itself tested against the NumPy statement of llama.cpp's order and llama.cpp's outputs) bit
for bit on the same values: N below, at and past one 16-row group and several groups with tails, 1..300 blocks
(odd block counts: the scale area's 64-byte padding), tiny and huge scales, extreme codes (-128 and 127: the
stored bytes 0 and 255), M 1..15 (the decode group loop, each group for every row) and 16..70 (the prefill GEMM
on panels loaded from the layout: 32-block chunks, so 34 and 66 blocks park accumulators; 70 rows: two 64-row
super-tiles), nth 1..3 and more threads than groups; the SIMD variant must equal the ref the same way; and both on
real rows of the Gemma 3 file's q8_0 token embedding (its tied LM head). The repacker is tested in
tests/weights/test_repack.py.
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

MAP_ID, GGML_MAP_ID = "linear_q8_0_q8_0_ggml_c16", "linear_q8_0_q8_0_ggml"
SIMD = map_variants(MAP_ID, ref=False)
# (M, N, blocks)
SHAPES = [(1, 1, 1), (1, 7, 4), (1, 16, 20), (1, 17, 3), (1, 33, 20), (1, 48, 64), (2, 5, 10), (3, 31, 12),
          (15, 40, 7), (1, 3, 130), (1, 64, 300), (4, 70, 2),
          (16, 16, 2), (17, 24, 64), (33, 37, 34), (23, 40, 5), (70, 130, 66), (16, 16, 96)]
_run = runner(w_offset=4, x_offset=38)  # weights: the ABI promises 4-byte alignment (KERNEL_ABI.md)


@pytest.fixture(scope="module")
def libs():
    return load_map_library(MAP_ID), load_map_library(GGML_MAP_ID)


def activations(m: int, nb: int, rng: np.random.Generator, scale: float = 1.0, qs: np.ndarray | None = None) -> np.ndarray:
    """q8_0 activation blocks uint8 [m, nb * 34]: quants in [-127, 127] (or qs for every block), f16 d of both signs."""
    quants = rng.integers(-127, 128, size=(m, nb, 32), dtype=np.int8) if qs is None else np.broadcast_to(
        qs.astype(np.int8), (m, nb, 32))
    d = (rng.uniform(0.1, 1.0, (m, nb)) * scale * np.where(rng.random((m, nb)) < 0.5, -1, 1)).astype(np.float16)
    x = np.zeros((m, nb, 34), np.uint8)
    x[:, :, 0:2] = d.view(np.uint8).reshape(m, nb, 2)
    x[:, :, 2:] = quants.view(np.uint8)
    return x.reshape(m, -1)


def c16(w: np.ndarray, n: int, k: int) -> np.ndarray:
    return repack("q8_0_c16", "q8_0", np.ascontiguousarray(w).reshape(-1), (k, n))


def cases(rng: np.random.Generator):
    for m, n, nb in SHAPES:
        w = random_blocks(n, nb, 34, rng, scale=float(rng.choice([1e-3, 1.0])), d_offsets=(0,), signed=True)
        yield f"random_{m}x{n}x{nb}", m, n, nb, w, activations(m, nb, rng)
    m, nb = 2, 6
    alt = np.where(np.arange(32) % 2 == 0, 127, -127)
    for n in (11, 16, 35):
        for code in (0x80, 0x7F):  # every value -128 (stored 0) / 127 (stored 255), d = 1
            w = np.full((n, nb, 34), code, np.uint8)
            w[:, :, 0:2] = np.array([0x3C00], np.uint16).view(np.uint8)
            yield f"extreme_codes_{code:#x}_n{n}", m, n, nb, w.reshape(n, -1), activations(m, nb, rng, qs=alt)
            yield f"extreme_sums_{code:#x}_n{n}", m, n, nb, w.reshape(n, -1), \
                activations(m, nb, rng, qs=np.full(32, -127))
        yield f"large_magnitudes_n{n}", m, n, nb, random_blocks(n, nb, 34, rng, scale=6e4, d_offsets=(0,), signed=True), \
            activations(m, nb, rng, 1e4)
        yield f"tiny_magnitudes_n{n}", m, n, nb, random_blocks(n, nb, 34, rng, scale=1e-7, d_offsets=(0,), signed=True), \
            activations(m, nb, rng, 1e-6)
        yield f"zero_weights_n{n}", m, n, nb, np.zeros((n, nb * 34), np.uint8), activations(m, nb, rng)


def test_linear_q8_0_c16_ref_matches_ggml_layout_ref(libs):
    (lib, spec), (glib, gspec) = libs
    ref, gref = bind(lib, spec, "ref"), bind(glib, gspec, "ref")
    for name, m, n, nb, w, x in cases(np.random.default_rng(31)):
        k = nb * 32
        want = _run(gref, w, x, m, n, k, 1)
        for nth in (1, 2, 3, n // 16 + 2):  # the last: more threads than groups (some get none)
            got = _run(ref, c16(w, n, k), x, m, n, k, nth, threaded=nth == 2)
            assert_close_or_equal(want, got, map_id=MAP_ID, variant="ref", context=f"case={name} nth={nth}")


@pytest.mark.parametrize("variant", SIMD)
def test_linear_q8_0_c16_variants_match_ref(libs, variant):
    skip_unless_runnable(MAP_ID, variant)
    (lib, spec), _ = libs
    ref, fn = bind(lib, spec, "ref"), bind(lib, spec, variant)
    for name, m, n, nb, w, x in cases(np.random.default_rng(32)):
        k = nb * 32
        wr = c16(w, n, k)
        want = _run(ref, wr, x, m, n, k, 1)
        for nth in (1, 2, 3, n // 16 + 2):
            got = _run(fn, wr, x, m, n, k, nth, threaded=nth == 2)
            assert_close_or_equal(want, got, map_id=MAP_ID, variant=variant, context=f"case={name} nth={nth}")


@pytest.mark.model
def test_linear_q8_0_c16_on_model_rows(libs, model_path):
    """Real q8_0 rows of the Gemma 3 file (its token embedding, the tied LM head: 40 rows, 2 groups and a tail)."""
    (lib, spec), (glib, gspec) = libs
    gref = bind(glib, gspec, "ref")
    names = runnable_variants(MAP_ID)
    rng = np.random.default_rng(33)
    for tensor, k, data in model_tensors(model_path, "q8_0"):
        rows = np.ascontiguousarray(data[:: data.shape[0] // 40][:40])
        n, nb = rows.shape[0], k // 32
        for m in (1, 16):
            x = activations(m, nb, rng, 0.02)
            want = _run(gref, rows, x, m, n, k, 1)
            for v in names:
                got = _run(bind(lib, spec, v), c16(rows, n, k), x, m, n, k, 2)
                assert_close_or_equal(want, got, map_id=MAP_ID, variant=v, context=f"tensor={tensor} K={k} N={n} M={m}")
