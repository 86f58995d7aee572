"""Differential tests for quantize_act_q8_0_rne (llama.cpp's x86 activation rule): variants vs ref, ref vs NumPy."""

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
    skip_unless_runnable,
)

from kernelmap.reference.ops import quantize_q8_0

MAP_ID = "quantize_act_q8_0_rne"


def _cases() -> list[tuple[str, np.ndarray]]:
    rng = np.random.default_rng(97)
    cases = [
        ("one_block", rng.standard_normal((1, 32)).astype(np.float32)),
        ("odd_blocks_m1", rng.standard_normal((1, 7 * 32)).astype(np.float32)),
        ("decode_640", (rng.standard_normal((1, 640)) * 4).astype(np.float32)),
        ("rows_5x2048", rng.uniform(-3, 3, (5, 2048)).astype(np.float32)),
        ("large_and_small", (rng.standard_normal((2, 64)) * np.array([[1e30], [1e-3]])).astype(np.float32)),
    ]
    zeros = rng.standard_normal((3, 96)).astype(np.float32)
    zeros[1, :] = 0.0
    cases.append(("zero_blocks", zeros))
    halves = np.zeros((2, 32), dtype=np.float32)
    halves[0, 0] = 127.0  # id = 1: exact .5 ties round to even
    halves[0, 1:] = np.arange(31, dtype=np.float32) * 0.5 - 7.5
    halves[1, 0] = -254.0
    halves[1, 1:] = np.arange(31, dtype=np.float32) - 15.0
    cases.append(("ties_to_even", halves))
    return cases


def _run(fn, x: np.ndarray, nth: int) -> np.ndarray:
    m, k = x.shape
    y, check = guarded((m * (k // 32) * 34,), np.uint8)
    for ith in range(nth):
        fn(ptr(y), ptr(x), m, k, ith, nth)
        check()
    return y.copy()


def _numpy_bytes(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        q = quantize_q8_0(x, rule="x86")
    m, k = x.shape
    out = np.zeros((m, k // 32, 34), dtype=np.uint8)
    with np.errstate(over="ignore"):
        d16 = (np.abs(x.reshape(m, k // 32, 32)).max(-1) / np.float32(127.0)).astype(np.float32).astype(np.float16)
    out[:, :, :2] = d16.view(np.uint8).reshape(m, k // 32, 2)
    out[:, :, 2:] = q.qs.reshape(m, k // 32, 32).view(np.uint8)
    return out.reshape(-1)


@pytest.mark.parametrize("variant", map_variants(MAP_ID))
@pytest.mark.parametrize("name,x", _cases(), ids=[c[0] for c in _cases()])
def test_variants_match_ref_bit_exact(variant: str, name: str, x: np.ndarray) -> None:
    skip_unless_runnable(MAP_ID, variant)
    lib, spec = load_map_library(MAP_ID)
    ref = _run(bind(lib, spec, "ref"), x, 1)
    fn = bind(lib, spec, variant)
    for nth in (1, 2, 3):
        assert_close_or_equal(ref, _run(fn, x, nth), map_id=MAP_ID, variant=variant, context=f"{name} nth={nth}")


@pytest.mark.parametrize("name,x", _cases(), ids=[c[0] for c in _cases()])
def test_ref_equals_numpy_x86_rule(name: str, x: np.ndarray) -> None:
    lib, spec = load_map_library(MAP_ID)
    got = _run(bind(lib, spec, "ref"), x, 1)
    assert_close_or_equal(_numpy_bytes(x), got, map_id=MAP_ID, variant="ref", context=name)
