"""Differential tests for the k-quant linear kernels (q4_k and q6_k weights x q8_k activations).

Every SIMD variant must be byte-identical to its ref (random and edge shapes, nth = 1, 2, 3), and
each ref must equal an independent NumPy computation: gguf.quants.dequantize of the weight rows
times the dequantized q8_k activations, accumulated in float64, within a tight tolerance; the last
check runs on real q4_k/q6_k tensor rows of the Gemma 3 GGUF.
"""

from __future__ import annotations

import numpy as np
import pytest
from gguf.quants import dequantize
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kernel_harness import (
    assert_close_or_equal,
    bind,
    guarded,
    load_map_library,
    map_variants,
    ptr,
    run_partitioned,
    runnable_variants,
    skip_unless_runnable,
)
from test_quantize_q8_k import quantize_q8_k_numpy

from gguf import GGMLQuantizationType

QK_K = 256
FORMATS = {
    "q4_k": ("linear_q4_k_q8_k", GGMLQuantizationType.Q4_K, 144, (0, 2)),
    "q6_k": ("linear_q6_k_q8_k", GGMLQuantizationType.Q6_K, 210, (208,)),
}
# (M, N, K): one block, odd block counts, > 8 blocks (partials wrap), rows not a multiple of the 4-row tile
SHAPES = [(1, 1, 256), (1, 7, 768), (2, 5, 2304), (5, 13, 512), (4, 3, 1024), (9, 6, 2560), (1, 33, 2048)]


def random_weights(fmt: str, n: int, k: int, rng: np.random.Generator, scale: float = 1e-2) -> np.ndarray:
    """Random blocks [n, k/256 * block_bytes] with finite f16 super-scales of magnitude ~scale."""
    _, _, size, half_offsets = FORMATS[fmt]
    nb = k // QK_K
    raw = rng.integers(0, 256, size=(n, nb, size), dtype=np.uint8)
    for off in half_offsets:
        d = (rng.uniform(0.1, 1.0, size=(n, nb)) * scale).astype(np.float16)
        if fmt == "q6_k":
            d = d * np.where(rng.random((n, nb)) < 0.5, -1, 1).astype(np.float16)
        raw[:, :, off:off + 2] = d.view(np.uint8).reshape(n, nb, 2)
    return raw.reshape(n, nb * size)


def activations(m: int, k: int, rng: np.random.Generator, scale: float = 1.0) -> np.ndarray:
    return quantize_q8_k_numpy((rng.standard_normal((m, k)) * scale).astype(np.float32))


@pytest.fixture(scope="module")
def libs():
    return {fmt: load_map_library(spec[0]) for fmt, spec in FORMATS.items()}


def _misaligned(a: np.ndarray, offset: int = 4) -> np.ndarray:
    """A copy of `a`'s bytes starting at an address that is `offset` mod 64 (weights: 4-byte alignment only)."""
    raw = np.ascontiguousarray(a).view(np.uint8).reshape(-1)
    buf = np.empty(raw.size + 128, dtype=np.uint8)
    start = (offset - buf.ctypes.data) % 64
    out = buf[start:start + raw.size]
    out[:] = raw
    return out


def _run(fn, w: np.ndarray, x: np.ndarray, m: int, n: int, k: int, nth: int, threaded: bool = False) -> np.ndarray:
    y, check = guarded((m, n), np.float32)
    wm, xm = _misaligned(w), _misaligned(x, 36)  # keep the buffers alive across the calls
    run_partitioned(fn, (ptr(y), ptr(wm), ptr(xm), m, n, k), nth, threaded=threaded)
    check()
    return y.copy()


def numpy_linear(fmt: str, w: np.ndarray, x: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(y, bound): float64 dequant(w) @ dequant(x).T and a float64 bound of |terms| for the tolerance."""
    wf = dequantize(w, FORMATS[fmt][1]).astype(np.float64).reshape(w.shape[0], k)
    xf = (x["d"].astype(np.float64)[..., None] * x["qs"].astype(np.float64)).reshape(x.shape[0], k)
    return xf @ wf.T, np.abs(xf) @ np.abs(wf).T


def _check_numpy(fmt: str, y: np.ndarray, w: np.ndarray, x: np.ndarray, k: int, context: str) -> None:
    want, bound = numpy_linear(fmt, w, x, k)
    # f32 rounding of a few per-block terms and of gguf's f32 dequant: observed <= 0.12 eps * bound
    tol = 2 * np.finfo(np.float32).eps * (bound + np.abs(want)) + 1e-30
    err = np.abs(y.astype(np.float64) - want)
    bad = np.argwhere(err > tol)
    if bad.size:
        i = tuple(bad[0])
        raise AssertionError(f"{FORMATS[fmt][0]} [ref] {context}: {len(bad)} outputs off numpy; first at {i}: "
                             f"expected {want[i]!r}, got {y[i]!r}, tol {tol[i]:.3g}; max err {err.max():.3g}")


@pytest.mark.parametrize("fmt", sorted(FORMATS))
@pytest.mark.parametrize("shape", SHAPES, ids=[f"{m}x{n}x{k}" for m, n, k in SHAPES])
def test_linear_kquant_ref_matches_numpy(libs, fmt, shape):
    m, n, k = shape
    rng = np.random.default_rng([SHAPES.index(shape), len(fmt), ord(fmt[1])])
    lib, spec = libs[fmt]
    w = random_weights(fmt, n, k, rng)
    x = activations(m, k, rng)
    y = _run(bind(lib, spec, "ref"), w, x, m, n, k, 1)
    _check_numpy(fmt, y, w, x, k, f"shape={shape}")


def _edge_inputs(fmt: str, rng: np.random.Generator):
    m, n, k = 6, 5, 2304
    w = random_weights(fmt, n, k, rng)
    x = activations(m, k, rng)
    yield "random", m, n, k, w, x
    yield "zero_activations", m, n, k, w, quantize_q8_k_numpy(np.zeros((m, k), np.float32))
    wz = w.copy()
    wz[:] = 0
    yield "zero_weights", m, n, k, wz, x
    yield "large_magnitudes", m, n, k, random_weights(fmt, n, k, rng, scale=6e4), activations(m, k, rng, 1e30)
    yield "extreme_codes", m, n, k, np.full_like(w, 0xFF), x
    yield "decode_row", 1, 37, 1024, random_weights(fmt, 37, 1024, rng), activations(1, 1024, rng)


# every non-ref variant the maps declare (the registry, not a hand-kept list)
VARIANTS = [(fmt, v) for fmt in sorted(FORMATS) for v in map_variants(FORMATS[fmt][0], ref=False)]


@pytest.mark.parametrize("fmt,variant", VARIANTS, ids=[f"{f}-{v}" for f, v in VARIANTS])
def test_linear_kquant_variants_match_ref(libs, fmt, variant):
    lib, spec = libs[fmt]
    skip_unless_runnable(spec["id"], variant)
    ref = bind(lib, spec, "ref")
    fn = bind(lib, spec, variant)
    rng = np.random.default_rng(7)
    cases = [("random", *s, random_weights(fmt, s[1], s[2], rng), activations(s[0], s[2], rng)) for s in SHAPES]
    cases += list(_edge_inputs(fmt, rng))
    for name, m, n, k, w, x in cases:
        want = _run(ref, w, x, m, n, k, 1)
        for nth in (1, 2, 3):
            got = _run(fn, w, x, m, n, k, nth, threaded=nth == 2)
            assert_close_or_equal(want, got, map_id=spec["id"], variant=variant,
                                  context=f"case={name} M={m} N={n} K={k} nth={nth}")


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_linear_kquant_ref_is_partition_invariant(libs, fmt):
    lib, spec = libs[fmt]
    ref = bind(lib, spec, "ref")
    rng = np.random.default_rng(11)
    m, n, k = 3, 10, 768
    w = random_weights(fmt, n, k, rng)
    x = activations(m, k, rng)
    want = _run(ref, w, x, m, n, k, 1)
    for nth in (2, 3, 4, 11):
        assert_close_or_equal(want, _run(ref, w, x, m, n, k, nth), map_id=spec["id"], variant="ref",
                              context=f"nth={nth}")


@pytest.fixture(scope="module")
def model_tensors(model_path):
    """{fmt: [first, last] q4_k / q6_k tensors of the real model} (one GGUFReader parse per module)."""
    import gguf

    reader = gguf.GGUFReader(model_path)
    found = {}
    for fmt, (_, qtype, _, _) in FORMATS.items():
        tensors = [t for t in reader.tensors if t.tensor_type == qtype]
        found[fmt] = [tensors[0], tensors[-1]] if tensors else []
    return found


@pytest.mark.model
@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_linear_kquant_ref_matches_numpy_on_model_rows(libs, model_tensors, fmt):
    assert model_tensors[fmt], f"the model has no {fmt} tensor"
    lib, spec = libs[fmt]
    ref = bind(lib, spec, "ref")
    rng = np.random.default_rng(3)
    for t in model_tensors[fmt]:
        data = np.asarray(t.data)
        k = int(t.shape[0])
        n = min(48, data.shape[0])
        rows = np.ascontiguousarray(data[:n].reshape(n, -1))
        x = activations(3, k, rng)
        y = _run(ref, rows, x, 3, n, k, 2)
        _check_numpy(fmt, y, rows, x, k, f"tensor={t.name} rows=0..{n - 1} K={k}")


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(fmt=st.sampled_from(sorted(FORMATS)), m=st.integers(1, 9), n=st.integers(1, 12), nb=st.integers(1, 11),
       nth=st.integers(1, 4), seed=st.integers(0, 2**32 - 1), wscale=st.sampled_from([1e-6, 1e-2, 3.0, 6e4]))
def test_linear_kquant_variants_match_ref_on_random_shapes(libs, fmt, m, n, nb, nth, seed, wscale):
    lib, spec = libs[fmt]
    rng = np.random.default_rng(seed)
    k = nb * QK_K
    w = random_weights(fmt, n, k, rng, scale=wscale)
    x = activations(m, k, rng, scale=float(rng.choice([1e-20, 1.0, 1e20])))
    want = _run(bind(lib, spec, "ref"), w, x, m, n, k, 1)
    for variant in runnable_variants(spec["id"], ref=False):
        got = _run(bind(lib, spec, variant), w, x, m, n, k, nth)
        assert_close_or_equal(want, got, map_id=spec["id"], variant=variant,
                              context=f"M={m} N={n} K={k} nth={nth} seed={seed}")
