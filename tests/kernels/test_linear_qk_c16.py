"""Differential tests for the K-quant linears that read the repacked weight layouts "q4_k_c16" / "q2_k_c16" /
"q3_k_c16" / "q6_k_c16" (weights/repack.py; one family body, linear/qk_c16_body.h).

linear_{q4_k,q2_k}_q8_k_ggml_c16 compute contracts linear.{q4_k,q2_k}.q8_k.ggml.v1 in their N % 8 == 0 order (llama.cpp's
repacked gemv), linear_{q3_k,q6_k}_q8_k_ggml_c16 contracts linear.{q3_k,q6_k}.q8_k.ggml.v1 (their vec_dot order, every
N), on weights
the packer repacked into 16-row groups. Each ref must equal the GGUF-layout provider's ref
(linear_<w>_q8_k_ggml, itself tested against the NumPy statement of llama.cpp's order and llama.cpp's outputs) bit
for bit on the same values: N below, at and past one 16-row group (8: half a group of pad rows; q3_K also N not a
multiple of 8; q6_K too),
1..12 superblocks, random and extreme codes, scales and mins (all at their largest, all 0; q6_K: codes 63 with
scales -128 against activations all -128, the largest |code * quant| sums the int16 step holds), huge and tiny
magnitudes, zero activations, M 1..15 (the decode group loop) and 16..150 (the prefill GEMM on panels loaded from
the layout: 8-superblock panels and their tail, row tiles of 8 and their tails), nth 1..3 and more threads than
groups; every SIMD variant must equal the ref the same way; and both on real q4_K and q6_K rows of the Gemma 3 file
(it has no q2_K or q3_K tensor). The repackers are tested in tests/weights/test_repack.py.
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
from linear_ggml_harness import QK_K, model_tensors, pack_q8_k, random_blocks, runner

from kernelmap.weights.repack import repack

FORMATS = ("q4_k", "q2_k", "q3_k", "q6_k")
# the ids spelled out: `kernelmap maps audit` finds a map's tests by its id in the test sources
MAP_IDS = {"q4_k": "linear_q4_k_q8_k_ggml_c16", "q2_k": "linear_q2_k_q8_k_ggml_c16", "q3_k": "linear_q3_k_q8_k_ggml_c16",
           "q6_k": "linear_q6_k_q8_k_ggml_c16"}
GGML_MAP_IDS = {"q4_k": "linear_q4_k_q8_k_ggml", "q2_k": "linear_q2_k_q8_k_ggml", "q3_k": "linear_q3_k_q8_k_ggml",
                "q6_k": "linear_q6_k_q8_k_ggml"}
BLOCK = {"q4_k": 144, "q2_k": 84, "q3_k": 110, "q6_k": 210}
HALVES = {"q4_k": (0, 2), "q2_k": (80, 82), "q3_k": (108,), "q6_k": (208,)}  # the f16 d (and dmin)
ANY_N_FORMATS = ("q3_k", "q6_k")  # the vec_dot contracts: every N
SIMD = [(f, v) for f in FORMATS for v in map_variants(MAP_IDS[f], ref=False)]
# (M, N, superblocks); N % 8 == 0 (the q4_K / q2_K maps' constraint)
SHAPES = [(1, 8, 1), (1, 16, 3), (1, 24, 2), (2, 40, 8), (3, 16, 11), (1, 64, 4), (7, 8, 5), (15, 48, 2),
          (16, 16, 9), (17, 24, 8), (40, 40, 3), (150, 48, 12), (23, 8, 1)]
# q3_K / q6_K take every N: tails of 1..15 rows in the last group, decode and GEMM
ANY_N = [(1, 5, 2), (1, 21, 3), (4, 37, 2), (16, 13, 9), (33, 50, 4), (1, 1, 1)]
_run = runner(w_offset=4, x_offset=36)  # weights: the ABI promises 4-byte alignment (KERNEL_ABI.md)


@pytest.fixture(scope="module")
def libs():
    return {f: (load_map_library(MAP_IDS[f]), load_map_library(GGML_MAP_IDS[f])) for f in FORMATS}


def weights(fmt: str, n: int, nb: int, rng: np.random.Generator, scale: float = 1e-2) -> np.ndarray:
    return random_blocks(n, nb, BLOCK[fmt], rng, scale=scale, d_offsets=HALVES[fmt], signed=True)


def acts(m: int, nb: int, rng: np.random.Generator, scale: float = 1.0) -> np.ndarray:
    return pack_q8_k((rng.standard_normal((m, nb * QK_K)) * scale).astype(np.float32))


def c16(fmt: str, w: np.ndarray, n: int, k: int) -> np.ndarray:
    return repack(f"{fmt}_c16", fmt, np.ascontiguousarray(w).reshape(-1), (k, n))


def cases(fmt: str, rng: np.random.Generator):
    for m, n, nb in SHAPES + (ANY_N if fmt in ANY_N_FORMATS else []):
        yield f"random_{m}x{n}x{nb}", m, n, nb, weights(fmt, n, nb, rng, float(rng.choice([1e-3, 1.0]))), \
            acts(m, nb, rng)
    m, nb = 3, 4
    for n in (8, 24):
        x = acts(m, nb, rng)
        xs = x.copy()
        xs["qs"] = np.where(np.arange(QK_K) % 2 == 0, 127, -127).astype(np.int8)
        xs["bsums"] = xs["qs"].reshape(m, nb, 16, 16).astype(np.int16).sum(-1)
        # every code, scale and min at its largest (q3_K: code 3, scale 31), d = dmin = 1; then every byte 0 (codes,
        # scales and mins 0; q3_K: code -4, scale -32, the largest products)
        top = np.full((n, nb, BLOCK[fmt]), 0xFF, np.uint8)
        low = np.zeros_like(top)
        for at in HALVES[fmt]:
            top[:, :, at:at + 2] = low[:, :, at:at + 2] = np.array([0x3C00], np.uint16).view(np.uint8)
        yield f"extreme_high_n{n}", m, n, nb, top.reshape(n, -1), xs
        yield f"extreme_low_n{n}", m, n, nb, low.reshape(n, -1), xs
        if fmt == "q6_k":  # codes 63, scales -128, activations -128: |code * quant| sums of 4 at 32256
            big = top.copy()
            big[:, :, 192:208] = 0x80
            xm = x.copy()
            xm["qs"] = -128
            xm["bsums"] = -128 * 16
            yield f"extreme_q6_n{n}", m, n, nb, big.reshape(n, -1), xm
        yield f"large_magnitudes_n{n}", m, n, nb, weights(fmt, n, nb, rng, 6e4), acts(m, nb, rng, 1e30)
        yield f"tiny_magnitudes_n{n}", m, n, nb, weights(fmt, n, nb, rng, 1e-7), acts(m, nb, rng, 1e-30)
        yield f"zero_activations_n{n}", m, n, nb, weights(fmt, n, nb, rng), \
            pack_q8_k(np.zeros((m, nb * QK_K), np.float32))
        yield f"zero_weights_n{n}", m, n, nb, np.zeros((n, nb * BLOCK[fmt]), np.uint8), x


@pytest.mark.parametrize("fmt", FORMATS)
def test_linear_qk_c16_ref_matches_ggml_layout_ref(libs, fmt):
    (lib, spec), (glib, gspec) = libs[fmt]
    ref, gref = bind(lib, spec, "ref"), bind(glib, gspec, "ref")
    for name, m, n, nb, w, x in cases(fmt, np.random.default_rng(41)):
        k = nb * QK_K
        want = _run(gref, w, x, m, n, k, 1)
        for nth in (1, 2, 3, n // 16 + 2):  # the last: more threads than groups (some get none)
            got = _run(ref, c16(fmt, w, n, k), x, m, n, k, nth, threaded=nth == 2)
            assert_close_or_equal(want, got, map_id=MAP_IDS[fmt], variant="ref", context=f"case={name} nth={nth}")


@pytest.mark.parametrize("fmt,variant", SIMD, ids=[f"{f}-{v}" for f, v in SIMD])
def test_linear_qk_c16_variants_match_ref(libs, fmt, variant):
    skip_unless_runnable(MAP_IDS[fmt], variant)
    (lib, spec), _ = libs[fmt]
    ref, fn = bind(lib, spec, "ref"), bind(lib, spec, variant)
    for name, m, n, nb, w, x in cases(fmt, np.random.default_rng(42)):
        k = nb * QK_K
        wr = c16(fmt, w, n, k)
        want = _run(ref, wr, x, m, n, k, 1)
        for nth in (1, 2, 3, n // 16 + 2):
            got = _run(fn, wr, x, m, n, k, nth, threaded=nth == 2)
            assert_close_or_equal(want, got, map_id=MAP_IDS[fmt], variant=variant, context=f"case={name} nth={nth}")


@pytest.mark.model
@pytest.mark.parametrize("fmt", ["q4_k", "q6_k"])
def test_linear_qk_c16_on_model_rows(libs, model_path, fmt):
    """Real rows of the Gemma 3 file (the first and last tensors of the format, 40 rows each: 2 groups and a tail)."""
    (lib, spec), (glib, gspec) = libs[fmt]
    gref = bind(glib, gspec, "ref")
    MAP_ID = MAP_IDS[fmt]
    names = runnable_variants(MAP_ID)
    rng = np.random.default_rng(43)
    for tensor, k, data in model_tensors(model_path, fmt):
        rows = np.ascontiguousarray(data[:: data.shape[0] // 40][:40])
        n, nb = rows.shape[0], k // QK_K
        for m in (1, 16):
            x = acts(m, nb, rng, 0.5)
            want = _run(gref, rows, x, m, n, k, 1)
            for v in names:
                got = _run(bind(lib, spec, v), c16(fmt, rows, n, k), x, m, n, k, 2)
                assert_close_or_equal(want, got, map_id=MAP_ID, variant=v, context=f"tensor={tensor} K={k} N={n} M={m}")
