"""The reference ops against the kernels' scalar `ref` variants: same contract, so bit-exact or within its rounding.

This is the cross-check that the NumPy oracle and the C oracles implement one contract each; the
kernel tests (tests/kernels) then hold every SIMD variant to its C ref.
"""

from __future__ import annotations

import kernel_harness as harness
import numpy as np

from kernelmap.reference import ops

RNG = np.random.default_rng(77)


def _ref_fn(map_id: str):
    lib, spec = harness.load_map_library(map_id)
    return harness.bind(lib, spec, "ref")


def _x(m, k, scale=3.0):
    x = (RNG.standard_normal((m, k)) * scale).astype(np.float32)
    x[0, :8] = [0.5, -0.5, 1.5, 2.5, -2.5, 0.0, 127.0, -127.0]  # exact ties once amax is 127
    return np.ascontiguousarray(x)


def test_quantize_q8_0_x86_rule_equals_the_rne_kernel_bytes():
    x = _x(3, 256)
    x[0, 8:32] = 0.25
    y = np.zeros((3, 256 // 32 * 34), np.uint8)
    _ref_fn("quantize_act_q8_0_rne")(harness.ptr(y), harness.ptr(x), 3, 256, 0, 1)
    assert np.array_equal(y, ops.quantize_q8_0(x, "x86").to_bytes())


def test_quantize_q8_0_ref_rule_equals_the_portable_kernel_bytes():
    x = _x(2, 128)
    y = np.zeros((2, 128 // 32 * 34), np.uint8)
    _ref_fn("quantize_act_q8_0")(harness.ptr(y), harness.ptr(x), 2, 128, 0, 1)
    assert np.array_equal(y, ops.quantize_q8_0(x, "ref").to_bytes())


def test_quantize_q8_k_equals_the_kernel_bytes():
    x = _x(2, 512)
    x[1, 256:] = 0.0
    y = np.zeros((2, 2 * 292), np.uint8)
    _ref_fn("quantize_act_q8_k")(harness.ptr(y), harness.ptr(x), 2, 512, 0, 1)
    assert np.array_equal(y, ops.quantize_q8_k(x).to_bytes())


def test_geglu_f16_table_rule_equals_the_kernel():
    gate = np.ascontiguousarray(np.concatenate([np.linspace(-12, 12, 1000), [-10.0, 10.0, 0.0]]).astype(np.float32))
    gate = gate.reshape(1, -1)
    up = np.ascontiguousarray(RNG.standard_normal(gate.shape).astype(np.float32))
    y = np.zeros_like(gate)
    _ref_fn("geglu_tanh_f32")(harness.ptr(y), harness.ptr(gate), harness.ptr(up), 1, gate.shape[1], 0, 1)
    np.testing.assert_array_equal(y, ops.geglu(gate, up, "f16_table"))


def test_rmsnorm_equals_the_kernel():
    x = _x(3, 640, 20.0)
    w = np.ascontiguousarray(RNG.standard_normal(640).astype(np.float32))
    y = np.zeros_like(x)
    _ref_fn("rmsnorm_f32")(harness.ptr(y), harness.ptr(x), harness.ptr(w), 3, 640, 1e-6, 0, 1)
    np.testing.assert_array_equal(y, ops.rmsnorm(x, w, 1e-6))


def test_rope_neox_matches_the_kernel_within_an_ulp_of_cos_sin():
    x = _x(4, 2 * 256, 1.0)
    y = np.zeros_like(x)
    _ref_fn("rope_neox_f32")(harness.ptr(y), harness.ptr(x), 4, 2, 256, 300, 10000.0, 1.0, 0, 1)
    np.testing.assert_allclose(y, ops.rope(x, 2, 300, 10000.0, 1.0, "neox"), rtol=1e-6, atol=1e-6)
