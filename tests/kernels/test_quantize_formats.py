"""Differential tests for the activation quantizers of the legacy and float formats: quantize_act_q8_1_rne,
quantize_act_f16, quantize_act_bf16 (llama.cpp's x86 quantize_row_q8_1, ggml_cpu_fp32_to_fp16 and
ggml_cpu_fp32_to_bf16).

Every variant is byte-identical to its ref for every (ith, nth) (odd block counts, rows, zero blocks, exact
rounding ties, huge and tiny values, subnormals, overflow to inf); the ref equals the NumPy statement of
llama.cpp's rule (tests/support/ggml_format_orders, checked against llama.cpp's own bytes in
tests/kernels/test_ops_vs_llama_formats.py).
"""

from __future__ import annotations

import ggml_format_orders as fo
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

MAP_IDS = {"q8_1": "quantize_act_q8_1_rne", "f16": "quantize_act_f16", "bf16": "quantize_act_bf16"}
FORMATS = sorted(MAP_IDS)
VARIANTS = [(fmt, v) for fmt in FORMATS for v in map_variants(MAP_IDS[fmt], ref=False)]


def _cases(fmt: str) -> list[tuple[str, np.ndarray]]:
    rng = np.random.default_rng(41)
    cases = [("one_block", rng.standard_normal((1, 32)).astype(np.float32)),
             ("odd_blocks", rng.standard_normal((1, 7 * 32)).astype(np.float32)),
             ("decode_640", (rng.standard_normal((1, 640)) * 4).astype(np.float32)),
             ("rows_5x2048", rng.uniform(-3, 3, (5, 2048)).astype(np.float32)),
             ("large_and_small", (rng.standard_normal((2, 64)) * np.array([[1e30], [1e-3]])).astype(np.float32))]
    zeros = rng.standard_normal((3, 96)).astype(np.float32)
    zeros[1, 32:64] = 0.0
    cases.append(("zero_block", zeros))
    ties = np.zeros((2, 32), np.float32)
    ties[0, 0] = 127.0  # id = 1: exact .5 ties round to even
    ties[0, 1:] = np.arange(31, dtype=np.float32) * 0.5 - 7.5
    ties[1, 0] = -254.0
    ties[1, 1:] = np.arange(31, dtype=np.float32) - 15.0
    cases.append(("ties_to_even", ties))
    if fmt != "q8_1":  # element-wise conversions: K needs no blocks; rounding edges of f16 and bf16
        edge = np.array([65504, 65519.996, 65520, 1e-8, 6e-8, 3e-8, -2.9802322e-08, 1e-40, -1e-40, 3.4e38, -3.4e38,
                         1.00390625, 1.01171875, -1.00390625, 1.0009765625, 2.0**-126, 2.0**-133, 0.0, -0.0],
                        np.float32)
        cases.append(("rounding_edges", edge.reshape(1, -1)))
        cases.append(("odd_k_3x13", rng.standard_normal((3, 13)).astype(np.float32)))
    return cases


def _nbytes(fmt: str, m: int, k: int) -> int:
    return m * k // 32 * 36 if fmt == "q8_1" else m * k * 2


def _run(fn, fmt: str, x: np.ndarray, nth: int) -> np.ndarray:
    m, k = x.shape
    y, check = guarded((_nbytes(fmt, m, k),), np.uint8)
    for ith in range(nth):
        fn(ptr(y), ptr(x), m, k, ith, nth)
        check()
    return y.copy()


def _numpy_bytes(fmt: str, x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        if fmt == "q8_1":
            return fo.quantize_q8_1(x).reshape(-1)
        return (fo.to_f16(x) if fmt == "f16" else fo.to_bf16(x)).view(np.uint8).reshape(-1)


@pytest.mark.parametrize("fmt,variant", VARIANTS, ids=[f"{f}-{v}" for f, v in VARIANTS])
def test_quantize_formats_variants_match_ref(fmt: str, variant: str) -> None:
    map_id = MAP_IDS[fmt]
    skip_unless_runnable(map_id, variant)
    lib, spec = load_map_library(map_id)
    ref, fn = bind(lib, spec, "ref"), bind(lib, spec, variant)
    for name, x in _cases(fmt):
        want = _run(ref, fmt, x, 1)
        for nth in (1, 2, 3, 7):
            assert_close_or_equal(want, _run(fn, fmt, x, nth), map_id=map_id, variant=variant,
                                  context=f"{name} nth={nth}")


@pytest.mark.parametrize("fmt", FORMATS)
def test_quantize_formats_ref_matches_numpy_oracle(fmt: str) -> None:
    map_id = MAP_IDS[fmt]
    lib, spec = load_map_library(map_id)
    ref = bind(lib, spec, "ref")
    for name, x in _cases(fmt):
        assert_close_or_equal(_numpy_bytes(fmt, x), _run(ref, fmt, x, 2), map_id=map_id, variant="ref", context=name)
