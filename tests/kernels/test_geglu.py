"""Tests for geglu_tanh_f32: variants bit-exact with ref, ref equal to a NumPy restatement, table equal to llama.cpp's.

Oracle: gate <= -10 -> 0, gate >= 10 -> gate*up, NaN -> qNaN*up, else the table entry of the f16
rounding of gate (NumPy's float16 cast rounds to nearest even) times up in f32. The table itself is
checked two ways: regenerating it gives the committed header, and its hash equals the hash of the
same range of llama.cpp's ggml_table_gelu_f16 (read from the peer build by tests/kernels/nonlinear_fixtures.py).
"""

from __future__ import annotations

import hashlib
import importlib.util
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kernel_harness import assert_close_or_equal, bind, guarded, host_can_run, load_map_library, ptr
from nonlinear_fixtures import LLAMA_GELU_TABLE_SHA256, LLAMA_SHA256, det_f32, sha256_of

from kernelmap.build.driver import KERNEL_ROOT

MAP_ID = "geglu_tanh_f32"
GELU_DIR = KERNEL_ROOT / "geglu"
# sha256 of ggml_table_gelu_f16[0x0000..0x4900] + [0x8000..0xC900] + one zero uint16, little-endian, read from
# llama.cpp's libggml-cpu after ggml_cpu_init(): tests/fixtures/llama_nonlinear.json, produced by nonlinear_fixtures.py.
LLAMA_TABLE_SHA256 = LLAMA_GELU_TABLE_SHA256


def _header_table() -> np.ndarray:
    text = (GELU_DIR / "gelu_table.h").read_text(encoding="ascii")
    body = text[text.index("= {") + 3:text.index("};")]
    return np.array([int(v, 16) for v in re.findall(r"0x[0-9a-f]{4}", body)], dtype=np.uint16)


TABLE = _header_table()
HALF = 0x4900 + 1


def geglu_numpy(gate: np.ndarray, up: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore", invalid="ignore"):
        h = gate.astype(np.float16).view(np.uint16)
    mag = np.minimum(h & 0x7FFF, 0x4900).astype(np.int64)
    idx = mag + np.where(h & 0x8000, HALF, 0)
    t = TABLE[idx].view(np.float16).astype(np.float32)
    t = np.where(np.isnan(gate), np.array([0x7FC00000], np.uint32).view(np.float32)[0], t)
    with np.errstate(over="ignore", invalid="ignore"):
        y = (t * up).astype(np.float32)
        y = np.where(gate >= 10, gate * up, y)
    return np.where(gate <= -10, np.float32(0), y).astype(np.float32)


def _cases() -> list[tuple[str, np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(3)
    out = []
    for name, (m, f) in {"decode_1x2048": (1, 2048), "odd_3x37": (3, 37), "one": (1, 1), "prefill_9x2048": (9, 2048)}.items():
        out.append((name, (rng.standard_normal((m, f)) * 3).astype(np.float32),
                    rng.standard_normal((m, f)).astype(np.float32)))
    g = np.concatenate([np.array([-10.0, 10.0, -9.999, 9.999, -10.001, 10.001, 0.0, -0.0, np.nan, -np.nan,
                                  np.inf, -np.inf, 1e-8, -1e-8, 65519.0, 70000.0, -3e38, 6e-8], np.float32),
                        np.linspace(-12, 12, 4001, dtype=np.float32)])
    u = rng.standard_normal(g.size).astype(np.float32)
    u[:3] = np.inf
    out.append(("edges", g.reshape(1, -1), u.reshape(1, -1)))
    return out


CASES = _cases()


@pytest.fixture(scope="module")
def lib_and_map():
    return load_map_library(MAP_ID)


def _run(fn, gate, up, nth):
    m, f = gate.shape
    y, check = guarded((m, f), np.float32)
    for ith in range(nth):
        fn(ptr(y), ptr(gate), ptr(up), m, f, ith, nth)
        check()
    return y.copy()


@pytest.mark.parametrize("variant", ["avx2", "avx512"])
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_geglu_variants_match_ref(lib_and_map, variant, case):
    lib, spec = lib_and_map
    ok, why = host_can_run(next(v["requires"] for v in spec["variants"] if v["name"] == variant))
    if not ok:
        pytest.skip(f"{MAP_ID} [{variant}]: {why}")
    name, gate, up = case
    expected = _run(bind(lib, spec, "ref"), gate, up, 1)
    for nth in (1, 2, 3):
        got = _run(bind(lib, spec, variant), gate, up, nth)
        assert_close_or_equal(expected, got, map_id=MAP_ID, variant=variant, context=f"{name} nth={nth}")


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_geglu_ref_matches_numpy(lib_and_map, case):
    lib, spec = lib_and_map
    name, gate, up = case
    got = _run(bind(lib, spec, "ref"), gate, up, 2)
    assert_close_or_equal(geglu_numpy(gate, up), got, map_id=MAP_ID, variant="ref", context=f"{name} vs numpy")


def test_gelu_table_matches_llama_cpp():
    assert TABLE.size == 2 * HALF + 1
    assert hashlib.sha256(TABLE.astype("<u2").tobytes()).hexdigest() == LLAMA_TABLE_SHA256


def test_gelu_table_regenerates_identically():
    spec = importlib.util.spec_from_file_location("gen_gelu_table", GELU_DIR / "gen_gelu_table.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    assert gen.render(gen.table()) == (GELU_DIR / "gelu_table.h").read_text(encoding="ascii")


def test_gelu_table_close_to_exact_tanh_gelu():
    x = np.concatenate([np.arange(HALF, dtype=np.uint16), np.arange(HALF, dtype=np.uint16) | 0x8000])
    xf = x.view(np.float16).astype(np.float64)
    exact = 0.5 * xf * (1 + np.tanh(0.7978845608028654 * xf * (1 + 0.044715 * xf * xf)))
    got = TABLE[:-1].view(np.float16).astype(np.float64)
    # f16 rounding (2^-11 relative) plus the f32 cancellation of 1 + tanh near x = -4.5 (absolute)
    assert np.all(np.abs(got - exact) <= 2.0 ** -10 * np.abs(exact) + 1e-6)


@pytest.mark.parametrize("variant", ["ref", "avx2", "avx512"])
def test_geglu_matches_llama_cpp(lib_and_map, variant):
    lib, spec = lib_and_map
    ok, why = host_can_run(next(v["requires"] for v in spec["variants"] if v["name"] == variant))
    if not ok:
        pytest.skip(f"{MAP_ID} [{variant}]: {why}")
    gate = det_f32(2048, 4, -12, 12).reshape(2, 1024)
    up = det_f32(2048, 5, -2, 2).reshape(2, 1024)
    got = _run(bind(lib, spec, variant), gate, up, 2)
    assert sha256_of(got) == LLAMA_SHA256["geglu_2x1024"], f"{MAP_ID} [{variant}] differs from ggml_geglu_split"


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(m=st.integers(1, 5), f=st.integers(1, 3000), spread=st.sampled_from([1.0, 8.0, 20.0, 1e5]),
       nth=st.integers(1, 4), seed=st.integers(0, 2**31))
def test_geglu_random_shapes_property(lib_and_map, m, f, spread, nth, seed):
    """Random shapes and ranges: ref equals NumPy, every runnable variant equals ref bit for bit."""
    lib, spec = lib_and_map
    rng = np.random.default_rng(seed)
    gate = (rng.standard_normal((m, f)) * spread).astype(np.float32)
    up = rng.standard_normal((m, f)).astype(np.float32)
    ref = _run(bind(lib, spec, "ref"), gate, up, nth)
    assert_close_or_equal(geglu_numpy(gate, up), ref, map_id=MAP_ID, variant="ref", context=f"{m}x{f}")
    for variant in ("avx2", "avx512"):
        if host_can_run(next(v["requires"] for v in spec["variants"] if v["name"] == variant))[0]:
            got = _run(bind(lib, spec, variant), gate, up, nth)
            assert_close_or_equal(ref, got, map_id=MAP_ID, variant=variant, context=f"{m}x{f} nth={nth}")
