"""Each reference op against an independent float64 formula (or gguf-py) on small inputs, plus quantizer tie rules."""

from __future__ import annotations

import numpy as np
import pytest

from gguf import GGMLQuantizationType, quants
from kernelmap.errors import ModelError
from kernelmap.reference import ops
from kernelmap.reference.forward import load_recipe

RNG = np.random.default_rng(1234)


def _rand(*shape, scale=1.0):
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


# quantizers ---------------------------------------------------------------------------------------

def test_quantize_q8_0_ref_rule_matches_gguf_quantize_bytes():
    x = _rand(3, 128, scale=3.0)
    ours = ops.quantize_q8_0(x, "ref").to_bytes()
    theirs = quants.quantize(x, GGMLQuantizationType.Q8_0)
    assert np.array_equal(ours, theirs)


def test_quantize_q8_0_ref_rule_rounds_halves_away_from_zero():
    x = np.zeros((1, 32), np.float32)
    x[0, :5] = [127.0, 0.5, -0.5, 1.5, 2.5]  # amax 127 -> d = 1, id = 1: exact ties
    q = ops.quantize_q8_0(x, "ref").qs[0, :5]
    assert q.tolist() == [127, 1, -1, 2, 3]


def test_quantize_q8_0_x86_rule_rounds_halves_to_even():
    x = np.zeros((1, 32), np.float32)
    x[0, :5] = [127.0, 0.5, -0.5, 1.5, 2.5]
    q = ops.quantize_q8_0(x, "x86").qs[0, :5]
    assert q.tolist() == [127, 0, 0, 2, 2]


def test_quantize_q8_0_zero_block_gives_zero_scale_and_quants():
    x = np.zeros((2, 64), np.float32)
    x[1, 32:] = _rand(32)
    r = ops.quantize_q8_0(x)
    assert r.d[0, 0] == 0 and r.d[1, 0] == 0 and not r.qs[:, :32].any()
    assert r.d[1, 1] > 0


def test_quantize_q8_0_stores_scale_rounded_to_f16():
    x = _rand(1, 32)
    r = ops.quantize_q8_0(x)
    d = np.float32(np.abs(x).max() / np.float32(127))
    assert r.d[0, 0] == np.float32(np.float16(d))


def test_quantize_q8_k_ties_round_to_even_and_scale_sign_follows_max():
    x = np.zeros((1, 256), np.float32)
    x[0, :6] = [-127.0, 2.5, 3.5, -0.5, 0.5, 126.5]  # max -127 -> iscale = 1 exactly
    r = ops.quantize_q8_k(x)
    assert r.qs[0, :6].tolist() == [-127, 2, 4, 0, 0, 126]
    assert r.d[0, 0] == np.float32(1.0)
    x[0, 0] = 127.0  # positive max -> iscale = -1, d = -1, quants flip sign
    r = ops.quantize_q8_k(x)
    assert r.d[0, 0] == np.float32(-1.0)
    assert r.qs[0, :3].tolist() == [-127, -2, -4]


def test_quantize_q8_k_magnitude_tie_takes_first_element():
    x = np.zeros((1, 256), np.float32)
    x[0, 3], x[0, 7] = 5.0, -5.0
    r = ops.quantize_q8_k(x)
    assert r.d[0, 0] < 0  # max = +5 (first), iscale = -127/5
    assert r.qs[0, 3] == -127 and r.qs[0, 7] == 127


def test_quantize_q8_k_bsums_are_sums_of_sixteen_and_zero_block_is_zero():
    x = _rand(2, 512, scale=4.0)
    x[1, 256:] = 0
    r = ops.quantize_q8_k(x)
    expect = r.qs.astype(np.int32).reshape(2, 32, 16).sum(-1)
    assert np.array_equal(r.bsums.astype(np.int32), expect)
    assert r.d[1, 1] == 0 and not r.qs[1, 256:].any()
    assert r.to_bytes().shape == (2, 2 * 292)


def test_quantize_q8_k_dequantize_is_close_to_input():
    x = _rand(4, 256)
    err = np.abs(ops.quantize_q8_k(x).dequantize() - x).max(axis=-1)
    assert (err <= np.abs(x).max(axis=-1) / 127 * 0.5 + 1e-6).all()


# linear -------------------------------------------------------------------------------------------

def test_linear_q8_0_weights_match_float64_formula_on_gguf_dequantized_operands():
    w = quants.quantize(_rand(16, 96), GGMLQuantizationType.Q8_0)
    x = _rand(5, 96, scale=2.0)
    xq = quants.quantize(x, GGMLQuantizationType.Q8_0)  # gguf-py's q8_0 = our "ref" rule
    expect = quants.dequantize(xq, GGMLQuantizationType.Q8_0).astype(np.float64) @ \
        quants.dequantize(w, GGMLQuantizationType.Q8_0).astype(np.float64).T
    y = ops.linear(x, w, "q8_0")
    assert y.dtype == np.float32 and y.shape == (5, 16)
    np.testing.assert_allclose(y, expect, rtol=1e-6, atol=1e-6)


def test_linear_q8_k_activation_path_uses_q8_k_quantization():
    w = _rand(8, 256)
    x = _rand(2, 256)
    y = ops.linear(x, w, "q4_k")  # float weights pass through; q4_k selects q8_k activations
    expect = ops.quantize_q8_k(x).dequantize().astype(np.float64) @ w.astype(np.float64).T
    np.testing.assert_allclose(y, expect, rtol=1e-6, atol=1e-6)


def test_linear_f32_weights_keep_f32_activations():
    w, x = _rand(4, 40), _rand(3, 40)
    np.testing.assert_allclose(ops.linear(x, w, "f32"), x.astype(np.float64) @ w.astype(np.float64).T,
                               rtol=1e-6)


# norms, rope --------------------------------------------------------------------------------------

def test_rmsnorm_matches_float64_formula():
    x, w = _rand(3, 640, scale=30.0), _rand(640)
    x64 = x.astype(np.float64)
    expect = x64 / np.sqrt((x64 ** 2).mean(-1, keepdims=True) + 1e-6) * w
    np.testing.assert_allclose(ops.rmsnorm(x, w, 1e-6), expect, rtol=2e-6, atol=1e-6)


def test_qk_norm_normalizes_each_head_separately():
    x, w = _rand(2, 4 * 8), _rand(8)
    y = ops.qk_norm(x, w, 4, 1e-6)
    for h in range(4):
        np.testing.assert_array_equal(y[:, h * 8:(h + 1) * 8], ops.rmsnorm(x[:, h * 8:(h + 1) * 8], w, 1e-6))


@pytest.mark.parametrize("mode", ["neox", "normal"])
def test_rope_matches_float64_rotation(mode):
    d, h, pos0 = 16, 2, 37
    x = _rand(3, h * d)
    y = ops.rope(x, h, pos0, 10000.0, 1.0, mode)
    half = d // 2
    for m in range(3):
        p = pos0 + m
        theta = p * 10000.0 ** (-2.0 * np.arange(half) / d)
        for hh in range(h):
            v = x[m, hh * d:(hh + 1) * d].astype(np.float64)
            a, b = (v[:half], v[half:]) if mode == "neox" else (v[0::2], v[1::2])
            r0 = a * np.cos(theta) - b * np.sin(theta)
            r1 = a * np.sin(theta) + b * np.cos(theta)
            got = y[m, hh * d:(hh + 1) * d]
            g0, g1 = (got[:half], got[half:]) if mode == "neox" else (got[0::2], got[1::2])
            np.testing.assert_allclose(g0, r0, rtol=1e-4, atol=1e-4)
            np.testing.assert_allclose(g1, r1, rtol=1e-4, atol=1e-4)


def test_rope_at_position_zero_is_identity():
    x = _rand(1, 64)
    np.testing.assert_array_equal(ops.rope(x, 1, 0, 1e6), x)


def test_rope_theta_ggml_rule_is_close_to_exact_angles():
    pos = np.arange(0, 600, 7)
    a = ops.rope_theta(pos, 256, 1e6, rule="ggml")
    b = ops.rope_theta(pos, 256, 1e6, rule="exact")
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)


# attention ----------------------------------------------------------------------------------------

def _attention64(q, k, v, hq, pos0, scale, window):
    m = q.shape[0]
    hkv, _, d = k.shape
    out = np.zeros((m, hq, d))
    for i in range(m):
        p = pos0 + i
        keys = [j for j in range(p + 1) if window == 0 or p - j < window]
        for h in range(hq):
            g = h // (hq // hkv)
            s = np.array([q[i, h * d:(h + 1) * d].astype(np.float64) @ k[g, j] for j in keys]) * scale
            e = np.exp(s - s.max())
            out[i, h] = (e / e.sum()) @ v[g, keys].astype(np.float64)
    return out.reshape(m, hq * d)


@pytest.mark.parametrize("window", [0, 3])
def test_attention_matches_float64_masked_softmax_with_gqa(window):
    hq, hkv, d, c, pos0, m = 4, 2, 8, 16, 5, 4
    k, v = _rand(hkv, c, d), _rand(hkv, c, d)
    q = _rand(m, hq * d)
    y = ops.attention(q, k, v, hq, pos0, 0.35, window, kv_dtype="f32")
    np.testing.assert_allclose(y, _attention64(q, k, v, hq, pos0, 0.35, window), rtol=1e-5, atol=1e-6)


def test_attention_f16_cache_rounds_keys_and_values():
    hq, d = 2, 8
    k, v = _rand(1, 6, d), _rand(1, 6, d)
    q = _rand(2, hq * d)
    k16 = k.astype(np.float16).astype(np.float32)
    v16 = v.astype(np.float16).astype(np.float32)
    y = ops.attention(q, k, v, hq, 3, 0.5, 0, kv_dtype="f16")
    np.testing.assert_allclose(y, _attention64(q, k16, v16, hq, 3, 0.5, 0), rtol=1e-5, atol=1e-6)


# activations, residual, embedding, argmax ---------------------------------------------------------

def test_gelu_tanh_exact_matches_float64_formula():
    x = np.linspace(-12, 12, 1001, dtype=np.float32)
    x64 = x.astype(np.float64)
    expect = 0.5 * x64 * (1 + np.tanh(np.sqrt(2 / np.pi) * x64 * (1 + 0.044715 * x64 ** 2)))
    np.testing.assert_allclose(ops.gelu_tanh(x, "exact"), expect, rtol=1e-5, atol=1e-6)


def test_gelu_tanh_f16_table_saturates_and_rounds_to_f16():
    x = np.array([-11.0, -10.0, 0.3, 1.7, 10.0, 12.5], np.float32)
    y = ops.gelu_tanh(x, "f16_table")
    assert y[0] == 0 and y[1] == 0 and y[4] == 10.0 and y[5] == 12.5
    assert np.array_equal(y[2:4], y[2:4].astype(np.float16).astype(np.float32))
    np.testing.assert_allclose(y[2:4], ops.gelu_tanh(x[2:4], "exact"), rtol=2e-3)


def test_geglu_and_swiglu_match_float64_formulas():
    g, u = _rand(3, 64, scale=2.0), _rand(3, 64)
    g64, u64 = g.astype(np.float64), u.astype(np.float64)
    gel = 0.5 * g64 * (1 + np.tanh(np.sqrt(2 / np.pi) * g64 * (1 + 0.044715 * g64 ** 2)))
    np.testing.assert_allclose(ops.geglu(g, u, "exact"), gel * u64, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ops.geglu(g, u), gel * u64, rtol=2e-3, atol=2e-3)
    np.testing.assert_allclose(ops.swiglu(g, u), g64 / (1 + np.exp(-g64)) * u64, rtol=1e-5, atol=1e-6)


def test_residual_add_is_float32_sum():
    a, b = _rand(2, 10), _rand(2, 10)
    assert np.array_equal(ops.residual_add(a, b), a + b)


def test_embedding_dequantizes_selected_rows_and_scales():
    table = _rand(10, 64)
    raw = quants.quantize(table, GGMLQuantizationType.Q8_0)
    y = ops.embedding(raw, [7, 0, 7], "q8_0", 2.5)
    deq = quants.dequantize(raw, GGMLQuantizationType.Q8_0)
    np.testing.assert_array_equal(y, (deq[[7, 0, 7]] * np.float32(2.5)).astype(np.float32))


def test_argmax_ties_take_lowest_index():
    x = np.array([[1.0, 3.0, 3.0, 2.0], [5.0, 5.0, 5.0, 5.0]], np.float32)
    assert ops.argmax(x).tolist() == [1, 0]


def test_load_recipe_unknown_architecture_raises_model_error_with_fields():
    with pytest.raises(ModelError) as info:
        load_recipe("no_such_arch")
    assert info.value.value == "no_such_arch" and info.value.pointer == "/architectures"
    assert "recipes.json" in str(info.value)


def test_policy_numerics_llama_cpu_follows_the_policy_file_contracts():
    from kernelmap.reference.forward import policy_numerics

    nm = policy_numerics("llama-cpu")
    acts = dict(nm.activations)
    assert (acts["q4_k"], acts["q6_k"], acts["q5_0"], acts["q8_0"]) == ("q8_k", "q8_k", "q8_0", "q8_0")
    assert nm.kv_dtype == "f16" and nm.gelu_rule == "f16_table"
    assert not nm.attn_q_f16 and not nm.attn_p_f16


def test_policy_numerics_unknown_policy_raises_model_error_listing_known_ones():
    from kernelmap.reference.forward import policy_numerics

    with pytest.raises(ModelError) as info:
        policy_numerics("no-such-policy")
    assert info.value.pointer == "policy" and "llama-cpu" in info.value.expected
