"""Differential tests for the float ggml-order linears: f16, bf16 and f32 weights (llama.cpp's x86 vec_dot orders).

Contracts linear.<t>.<t>.ggml.v1 (the activation row already in the weight's type): f16 / f32 accumulate 64 f32
lanes by fma and reduce (s0 + s2) + (s1 + s3), halves, then the 8-lane fold (linear.<t>.<t>.ggml_dot32.v1, llama.cpp's
AVX2 build: 32 lanes for every type, (a0 + a2) + (a1 + a3), halves, then two horizontal adds or, bf16, the fold); f16 adds its K % 64 tail in double,
f32 the tail the peer's binary computes; bf16 runs vdpbf16ps (DAZ / FTZ, odd element first) into two 16-lane
accumulators reduced separately and added in double. Every SIMD variant must be byte-identical to the ref (M 1..17
with tile tails, N tails, K with and without a 64-tail, subnormal bf16 products, huge magnitudes, nth 1..3); the
ref must equal the NumPy statement of llama.cpp's order (tests/support/ggml_format_orders.linear_float, which
matched llama.cpp's own ggml_vec_dot_<t> outputs: tests/kernels/test_ops_vs_llama_formats.py) bit for bit; and the
ref must not depend on (ith, nth) or on the other activation rows.
"""

from __future__ import annotations

import ggml_format_orders as fo
import numpy as np
import pytest
from kernel_harness import bind, load_map_library, map_variants, skip_unless_runnable
from linear_ggml_harness import (
    assert_partition_invariant,
    assert_ref_matches,
    assert_rows_independent,
    assert_variants_match_ref,
    runner,
    simd_variants,
)

TYPES = ("f16", "bf16", "f32", "f16_dot32", "bf16_dot32", "f32_dot32")  # <t>_dot32: llama.cpp's AVX2 build's order
MAP_IDS = {"f16": "linear_f16_f16_ggml", "bf16": "linear_bf16_bf16_ggml", "f32": "linear_f32_f32_ggml",
           "f16_dot32": "linear_f16_f16_ggml_dot32", "bf16_dot32": "linear_bf16_bf16_ggml_dot32",
           "f32_dot32": "linear_f32_f32_ggml_dot32"}
SIMD = [(t, v) for t in TYPES for v in map_variants(MAP_IDS[t], ref=False)]
# (M, N, K): decode row pairs with tails, prefill tiles of 4 / 2 / 1 rows, K = 64 * n with and without a tail
SHAPES = [(1, 1, 64), (1, 7, 640), (1, 16, 17), (1, 9, 200), (2, 5, 1000), (3, 4, 127), (4, 3, 64), (5, 6, 192),
          (7, 2, 71), (17, 3, 130), (1, 33, 2048)]
_run = runner(w_offset=4, x_offset=36)


def convert(xf: np.ndarray, t: str) -> np.ndarray:
    """f32 values -> rows of type t as llama.cpp converts them (f16 / bf16 bits, or the f32 values)."""
    return {"f16": fo.to_f16, "bf16": fo.to_bf16, "f32": lambda a: np.asarray(a, np.float32)}[t.removesuffix("_dot32")](xf)


def rows(t: str, m: int, k: int, rng: np.random.Generator, scale: float = 1.0, tiny: bool = False) -> np.ndarray:
    xf = (rng.standard_normal((m, k)) * scale).astype(np.float32)
    if tiny:  # products below 2^-126: vdpbf16ps flushes them (and subnormal inputs) to zero; row 0 is tiny
        xf[:, : k // 2] *= np.float32(1e-19)  # throughout, so its outputs are made of flushed products only
        xf[0] *= np.float32(1e-19)
    return np.ascontiguousarray(convert(xf, t))


@pytest.fixture(scope="module")
def libs():
    return {t: load_map_library(MAP_IDS[t]) for t in TYPES}


def _cases(t: str, rng: np.random.Generator):
    for m, n, k in SHAPES:
        yield f"random_{m}x{n}x{k}", m, n, k, rows(t, n, k, rng, 0.05), rows(t, m, k, rng)
    yield "subnormal_products", 3, 5, 200, rows(t, 5, 200, rng, 0.05, tiny=True), rows(t, 3, 200, rng, tiny=True)
    yield "large_magnitudes", 2, 3, 130, rows(t, 3, 130, rng, 3e2), rows(t, 2, 130, rng, 1e2)
    yield "zero_activations", 2, 3, 64, rows(t, 3, 64, rng), np.ascontiguousarray(convert(np.zeros((2, 64)), t))


@pytest.mark.parametrize("t,variant", SIMD, ids=[f"{t}-{v}" for t, v in SIMD])
def test_linear_float_ggml_variants_match_ref(libs, t, variant):
    skip_unless_runnable(MAP_IDS[t], variant)
    lib, spec = libs[t]
    assert_variants_match_ref(lib, spec, _run, list(_cases(t, np.random.default_rng(31))), [variant])


@pytest.mark.parametrize("t", TYPES)
def test_linear_float_ggml_ref_matches_numpy_oracle(libs, t):
    lib, spec = libs[t]
    rng = np.random.default_rng(32)
    for name, m, n, k, w, x in _cases(t, rng):
        assert_ref_matches(lib, spec, _run, fo.linear_float(x, w, t), w, x, m, n, k, nth=2,
                           context=f"numpy oracle {name}")


def test_linear_bf16_ggml_ref_flushes_subnormals_like_vdpbf16ps(libs, monkeypatch):
    """On subnormal products the ref equals the flushing order and differs from the same order without the
    DAZ / FTZ steps, so the flushes are really exercised."""
    rng = np.random.default_rng(33)
    w, x = rows("bf16", 5, 200, rng, 0.05, tiny=True), rows("bf16", 3, 200, rng, tiny=True)
    lib, spec = libs["bf16"]
    got = _run(bind(lib, spec, "ref"), w, x, 3, 5, 200, 1)
    assert np.array_equal(got.view(np.uint32), fo.linear_float(x, w, "bf16").view(np.uint32))
    monkeypatch.setattr(fo, "_daz", lambda v: np.asarray(v, np.float32))
    monkeypatch.setattr(fo, "_ftz", lambda v: np.asarray(v, np.float32))
    assert not np.array_equal(got.view(np.uint32), fo.linear_float(x, w, "bf16").view(np.uint32))


@pytest.mark.parametrize("t", TYPES)
def test_linear_float_ggml_ref_is_partition_invariant(libs, t):
    lib, spec = libs[t]
    rng = np.random.default_rng(34)
    for m, n, k in ((3, 11, 200), (5, 8, 640)):
        w, x = rows(t, n, k, rng, 0.05), rows(t, m, k, rng)
        assert_partition_invariant(lib, spec, _run, w, x, m, n, k, (2, 3, 5, 11, 16))
        for variant in simd_variants(spec):
            assert_rows_independent(lib, spec, _run, variant, w, x, m, n, k, nth=1)
