"""Tests for swiglu_f32: SIMD variants within the map's tolerance of ref and byte-identical with each other.

ref is checked against a float64 NumPy silu(gate)*up; its own rounding (expf, one division, one
multiply) stays within a few f32 ulp.
"""

from __future__ import annotations

import numpy as np
import pytest
from kernel_harness import (
    assert_close_or_equal,
    bind,
    guarded,
    load_map_library,
    map_variants,
    ptr,
    runnable_variants,
    skip_unless_runnable,
)

MAP_ID = "swiglu_f32"


def _cases() -> list[tuple[str, np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(9)
    out = []
    for name, (m, f) in {"decode_1x2048": (1, 2048), "odd_3x37": (3, 37), "one": (1, 1), "prefill_5x4096": (5, 4096)}.items():
        out.append((name, (rng.standard_normal((m, f)) * 4).astype(np.float32),
                    rng.standard_normal((m, f)).astype(np.float32)))
    g = np.concatenate([np.array([0.0, -0.0, 80.0, -80.0, 86.0, -86.0, 87.0, -87.0, 88.5, -88.5, 89.0, -89.0, 95.0,
                                  -95.0, 1e-30, -1e-30, 1e6, -1e6], np.float32),
                        np.linspace(-100, 100, 8001, dtype=np.float32)])
    out.append(("edges", g.reshape(1, -1), rng.standard_normal(g.size).astype(np.float32).reshape(1, -1)))
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


@pytest.mark.parametrize("variant", map_variants(MAP_ID, ref=False))
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_swiglu_variants_match_ref(lib_and_map, variant, case):
    lib, spec = lib_and_map
    skip_unless_runnable(MAP_ID, variant)
    name, gate, up = case
    expected = _run(bind(lib, spec, "ref"), gate, up, 1)
    first = _run(bind(lib, spec, variant), gate, up, 1)
    assert_close_or_equal(expected, first, map_id=MAP_ID, variant=variant, comparison=spec["numerics"]["comparison"],
                          context=name)
    for nth in (2, 3):
        got = _run(bind(lib, spec, variant), gate, up, nth)
        assert_close_or_equal(first, got, map_id=MAP_ID, variant=variant, context=f"{name} nth={nth} vs nth=1")


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_swiglu_simd_variants_identical(lib_and_map, case):
    """Every SIMD variant the host runs gives the bits of the first one (their shared polynomial)."""
    lib, spec = lib_and_map
    simd = runnable_variants(MAP_ID, ref=False)
    if len(simd) < 2:
        pytest.skip(f"{MAP_ID}: fewer than two SIMD variants run on this host ({simd})")
    name, gate, up = case
    first = _run(bind(lib, spec, simd[0]), gate, up, 1)
    for variant in simd[1:]:
        got = _run(bind(lib, spec, variant), gate, up, 2)
        assert_close_or_equal(first, got, map_id=MAP_ID, variant=f"{variant} vs {simd[0]}", context=name)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_swiglu_ref_matches_numpy(lib_and_map, case):
    lib, spec = lib_and_map
    name, gate, up = case
    got = _run(bind(lib, spec, "ref"), gate, up, 2)
    g = gate.astype(np.float64)
    with np.errstate(over="ignore"):
        want = g / (1.0 + np.exp(-g)) * up.astype(np.float64)
    assert_close_or_equal(want, got.astype(np.float64), map_id=MAP_ID, variant="ref",
                          comparison={"rtol": 1e-6, "atol": 1e-30}, context=f"{name} vs float64")
