"""Reference numerics: one NumPy function per logical op, following the numerical contract our C kernels follow.

Input -> output: NumPy arrays (float32 activations, raw GGML block bytes for weights) -> NumPy arrays.
This module is the oracle for kernel and end-to-end tests; it is written for clarity, not speed, and
it does not read files, plan memory or choose contracts (callers pass the contract's choices as
arguments, e.g. the activation quantizer's rounding rule or the GELU evaluation).

Numerical conventions (stated once, used everywhere below):
- Activations are float32; every elementwise step is evaluated in float32, as the kernels do.
- Reductions that the kernels evaluate in a fixed order in float32 (dot products) are evaluated here
  in float64 and rounded to float32 once. The difference between the two is bounded by the usual
  K * eps32 * sum|a*b| term, so tests compare kernels against this reference with a tolerance
  (rtol ~ 1e-5 for K <= 4096), never bit-exactly. Quantizers, by contrast, are bit-exact.
- Reductions that llama.cpp itself evaluates in double (the RMS norm's sum of squares, the softmax
  denominator) are evaluated in float64 here too.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gguf import GGMLQuantizationType, quants

__all__ = [
    "QuantRows",
    "quantize_q8_0",
    "quantize_q8_k",
    "dequantize_rows",
    "linear",
    "rmsnorm",
    "qk_norm",
    "rope_theta",
    "rope",
    "attention",
    "gelu_tanh",
    "geglu",
    "swiglu",
    "residual_add",
    "embedding",
    "argmax",
]

QK8_0 = 32
QK_K = 256
_GELU_A = np.float32(0.044715)
_SQRT_2_OVER_PI = np.float32(0.7978845608028654)

_QTYPE = {
    "f32": GGMLQuantizationType.F32,
    "f16": GGMLQuantizationType.F16,
    "bf16": GGMLQuantizationType.BF16,
    "q4_0": GGMLQuantizationType.Q4_0,
    "q4_1": GGMLQuantizationType.Q4_1,
    "q5_0": GGMLQuantizationType.Q5_0,
    "q5_1": GGMLQuantizationType.Q5_1,
    "q8_0": GGMLQuantizationType.Q8_0,
    "q2_k": GGMLQuantizationType.Q2_K,
    "q3_k": GGMLQuantizationType.Q3_K,
    "q4_k": GGMLQuantizationType.Q4_K,
    "q5_k": GGMLQuantizationType.Q5_K,
    "q6_k": GGMLQuantizationType.Q6_K,
}

# Which activation format llama.cpp's CPU backend pairs with each weight format (its vec_dot_type).
ACTIVATION_FOR_WEIGHT = {
    "f32": "f32",
    "f16": "f16",
    "q4_0": "q8_0",
    "q5_0": "q8_0",
    "q8_0": "q8_0",
    "q2_k": "q8_k",
    "q3_k": "q8_k",
    "q4_k": "q8_k",
    "q5_k": "q8_k",
    "q6_k": "q8_k",
}


@dataclass(frozen=True)
class QuantRows:
    """Quantized activation rows: int8 values [M, K], one float32 scale per block [M, K/block]."""

    kind: str  # "q8_0" or "q8_k"
    qs: np.ndarray  # int8 [M, K]
    d: np.ndarray  # float32 [M, K/block]; for q8_0 already rounded to f16
    bsums: np.ndarray | None = None  # int16 [M, K/16] for q8_k, None for q8_0

    @property
    def block(self) -> int:
        return QK8_0 if self.kind == "q8_0" else QK_K

    def dequantize(self) -> np.ndarray:
        """float32 [M, K]: d * q per block (exact in float32)."""
        m, k = self.qs.shape
        q = self.qs.reshape(m, k // self.block, self.block).astype(np.float32)
        return (q * self.d[:, :, None]).reshape(m, k)

    def to_bytes(self) -> np.ndarray:
        """uint8 [M, nblocks * block_bytes]: the GGML block layout the kernels read and write."""
        m, k = self.qs.shape
        nb = k // self.block
        if self.kind == "q8_0":
            blk = np.zeros((m, nb), dtype=[("d", "<f2"), ("qs", "i1", (QK8_0,))])
            blk["d"] = self.d.astype(np.float16)
            blk["qs"] = self.qs.reshape(m, nb, QK8_0)
        else:
            blk = np.zeros((m, nb), dtype=[("d", "<f4"), ("qs", "i1", (QK_K,)), ("bsums", "<i2", (16,))])
            blk["d"] = self.d
            blk["qs"] = self.qs.reshape(m, nb, QK_K)
            blk["bsums"] = self.bsums.reshape(m, nb, 16)
        return blk.view(np.uint8).reshape(m, -1)


def _rows(x: np.ndarray, block: int) -> np.ndarray:
    x = np.ascontiguousarray(x, dtype=np.float32)
    if x.ndim == 1:
        x = x[None, :]
    if x.shape[-1] % block:
        raise ValueError(f"row length {x.shape[-1]} is not a multiple of the block size {block}")
    return x


def _round_half_away(v: np.ndarray) -> np.ndarray:
    """C roundf: halves go away from zero."""
    return np.sign(v) * np.floor(np.abs(v) + np.float32(0.5))


def quantize_q8_0(x: np.ndarray, rule: str = "ref") -> QuantRows:
    """Quantize float32 rows [M, K] to q8_0 (blocks of 32, f16 scale d = amax / 127).

    rule "x86": the rule llama.cpp's AVX2/AVX-512 quantizer applies on x86 — multiply by the float32
    reciprocal 127 / amax and round half to even. rule "ref": ggml's portable reference — multiply by
    1 / d (d = amax / 127 in float32) and round half away from zero. Both store d rounded to f16 and
    quantize with the float32 d, not the rounded one. An all-zero block gets d = 0 and q = 0.
    """
    x = _rows(x, QK8_0)
    m, k = x.shape
    b = x.reshape(m, k // QK8_0, QK8_0)
    amax = np.abs(b).max(axis=-1)
    d = (amax / np.float32(127.0)).astype(np.float32)
    with np.errstate(divide="ignore"):
        if rule == "x86":
            inv = np.where(amax != 0, np.float32(127.0) / amax, np.float32(0.0)).astype(np.float32)
            q = np.rint(b * inv[:, :, None])
        elif rule == "ref":
            inv = np.where(d != 0, np.float32(1.0) / d, np.float32(0.0)).astype(np.float32)
            q = _round_half_away(b * inv[:, :, None])
        else:
            raise ValueError(f"unknown q8_0 rounding rule {rule!r} (expected x86 or ref)")
    qs = np.clip(q, -127, 127).astype(np.int8).reshape(m, k)
    d16 = d.astype(np.float16).astype(np.float32)
    return QuantRows("q8_0", qs, d16)


def quantize_q8_k(x: np.ndarray) -> QuantRows:
    """Quantize float32 rows [M, K] to q8_k (blocks of 256, float32 scale, 16 partial sums per block).

    ggml's rule: take the element of largest magnitude (the first one on ties) with its sign, max;
    iscale = -127 / max in float32; q = round-half-even(iscale * x), capped at 127; d = 1 / iscale.
    (d is negative when max is positive: the sign flip cancels in d * q.) bsums[j] = sum of q over
    elements 16j..16j+15. An all-zero block gets d = 0, q = 0, bsums = 0.
    """
    x = _rows(x, QK_K)
    m, k = x.shape
    nb = k // QK_K
    b = x.reshape(m, nb, QK_K)
    idx = np.abs(b).argmax(axis=-1)
    mx = np.take_along_axis(b, idx[:, :, None], axis=-1)[:, :, 0]
    zero = mx == 0
    with np.errstate(divide="ignore"):
        iscale = np.where(zero, np.float32(0.0), np.float32(-127.0) / np.where(zero, 1, mx)).astype(np.float32)
        d = np.where(zero, np.float32(0.0), np.float32(1.0) / np.where(zero, 1, iscale)).astype(np.float32)
    q = np.minimum(np.rint(b * iscale[:, :, None]), 127).astype(np.int8)
    bsums = q.reshape(m, nb, 16, 16).astype(np.int32).sum(axis=-1).astype(np.int16)
    return QuantRows("q8_k", q.reshape(m, k), d, bsums.reshape(m, nb * 16))


def dequantize_rows(data: np.ndarray, w_type: str) -> np.ndarray:
    """float32 [N, K] from raw GGML bytes uint8 [N, row_bytes] via gguf-py.

    Arrays that are already float32 or float64 (dequantized once by a caller) pass through unchanged.
    """
    data = np.asarray(data)
    if data.dtype in (np.float32, np.float64):
        return data
    if data.dtype == np.float16:
        return data.astype(np.float32)
    if w_type not in _QTYPE:
        raise ValueError(f"unsupported weight type {w_type!r} (expected one of {sorted(_QTYPE)})")
    return np.asarray(quants.dequantize(data, _QTYPE[w_type]), dtype=np.float32)


def _activation(x: np.ndarray, act_type: str, q8_0_rule: str) -> np.ndarray:
    if act_type == "f32":
        return np.asarray(x, dtype=np.float32)
    if act_type == "f16":
        return np.asarray(x, dtype=np.float32).astype(np.float16).astype(np.float32)
    if act_type == "q8_0":
        return quantize_q8_0(x, q8_0_rule).dequantize()
    if act_type == "q8_k":
        return quantize_q8_k(x).dequantize()
    raise ValueError(f"unsupported activation type {act_type!r} (expected f32, f16, q8_0 or q8_k)")


def linear(x: np.ndarray, w: np.ndarray, w_type: str, act_type: str | None = None,
           q8_0_rule: str = "ref") -> np.ndarray:
    """y [M, N] = dequant(quantize(x)) [M, K] @ dequant(w)^T, summed in float64 and rounded to float32.

    `w` is raw GGML bytes [N, row_bytes] or an already dequantized float32 [N, K] array (pass
    w_type anyway: it selects the activation format when act_type is None).
    """
    act_type = act_type or ACTIVATION_FOR_WEIGHT[w_type]
    wf = dequantize_rows(w, w_type)
    xf = _activation(np.atleast_2d(x), act_type, q8_0_rule)
    return (xf.astype(np.float64) @ wf.astype(np.float64, copy=False).T).astype(np.float32)


def rmsnorm(x: np.ndarray, w: np.ndarray, eps: float) -> np.ndarray:
    """y = (x * (1 / sqrtf(mean(x^2) + eps))) * w, per row, as ggml does it.

    The squares are float32 products summed in float64; mean and scale are float32; the two
    multiplications are separate float32 roundings (normalize, then weight).
    """
    x = np.asarray(x, dtype=np.float32)
    n = x.shape[-1]
    ss = (x * x).astype(np.float64).sum(axis=-1, keepdims=True)
    mean = (ss / n).astype(np.float32)
    scale = (np.float32(1.0) / np.sqrt(mean + np.float32(eps))).astype(np.float32)
    return ((x * scale) * np.asarray(w, dtype=np.float32)).astype(np.float32)


def qk_norm(x: np.ndarray, w: np.ndarray, n_heads: int, eps: float) -> np.ndarray:
    """RMS norm of each head's D values: x [M, H*D], w [D] -> [M, H*D]."""
    x = np.asarray(x, dtype=np.float32)
    m = x.shape[0]
    d = x.shape[1] // n_heads
    return rmsnorm(x.reshape(m, n_heads, d), w, eps).reshape(m, n_heads * d)


def rope_theta(positions: np.ndarray, head_dim: int, freq_base: float, freq_scale: float = 1.0,
               rule: str = "ggml") -> np.ndarray:
    """Rotation angles float32 [P, D/2] for the given positions.

    rule "ggml": theta_i = p * r^i with r = freq_base^(-2/D) in float32 and r^i formed by repeated
    float32 multiplication starting from theta_0 = p (ggml's rope cache), then times freq_scale.
    rule "exact": the same angles evaluated in float64 and rounded once.
    """
    pos = np.asarray(positions, dtype=np.float32).reshape(-1)
    half = head_dim // 2
    if rule == "ggml":
        r = np.float32(np.power(np.float32(freq_base), np.float32(-2.0) / np.float32(head_dim), dtype=np.float32))
        out = np.empty((pos.size, half), dtype=np.float32)
        theta = pos.copy()
        for i in range(half):
            out[:, i] = theta * np.float32(freq_scale)
            theta = (theta * r).astype(np.float32)
        return out
    if rule == "exact":
        i = np.arange(half, dtype=np.float64)
        inv = np.power(float(freq_base), -2.0 * i / head_dim)
        return (pos.astype(np.float64)[:, None] * inv[None, :] * freq_scale).astype(np.float32)
    raise ValueError(f"unknown rope theta rule {rule!r} (expected ggml or exact)")


def rope(x: np.ndarray, n_heads: int, pos0: int, freq_base: float, freq_scale: float = 1.0,
         mode: str = "neox", theta_rule: str = "ggml") -> np.ndarray:
    """Rotate each head of x [M, H*D]; row m is at position pos0 + m.

    mode "neox" pairs (i, i + D/2); mode "normal" pairs (2i, 2i + 1). cos and sin are float32 values
    of the float32 angle; y0 = x0*cos - x1*sin, y1 = x0*sin + x1*cos, each product and sum in float32.
    """
    x = np.asarray(x, dtype=np.float32)
    m = x.shape[0]
    d = x.shape[1] // n_heads
    th = rope_theta(np.arange(pos0, pos0 + m), d, freq_base, freq_scale, theta_rule)
    c = np.cos(th.astype(np.float64)).astype(np.float32)[:, None, :]
    s = np.sin(th.astype(np.float64)).astype(np.float32)[:, None, :]
    h = x.reshape(m, n_heads, d)
    if mode == "neox":
        x0, x1 = h[..., : d // 2], h[..., d // 2:]
    elif mode == "normal":
        x0, x1 = h[..., 0::2], h[..., 1::2]
    else:
        raise ValueError(f"unknown rope mode {mode!r} (expected neox or normal)")
    y0 = (x0 * c - x1 * s).astype(np.float32)
    y1 = (x0 * s + x1 * c).astype(np.float32)
    y = np.empty_like(h)
    if mode == "neox":
        y[..., : d // 2], y[..., d // 2:] = y0, y1
    else:
        y[..., 0::2], y[..., 1::2] = y0, y1
    return y.reshape(m, n_heads * d)


def attention(q: np.ndarray, k_cache: np.ndarray, v_cache: np.ndarray, n_q_heads: int, pos0: int,
              scale: float, window: int = 0, kv_dtype: str = "f16", q_f16: bool = False,
              p_f16: bool = False) -> np.ndarray:
    """Causal grouped-query attention: q [M, Hq*D], caches [Hkv, C, D] -> y [M, Hq*D].

    Query row m is at position p = pos0 + m and sees keys j with j <= p and, if window > 0,
    p - j < window. Query head h reads KV head h // (Hq / Hkv). Scores are dot(q, k) * scale;
    softmax subtracts the row max, exponentiates in float32 and normalizes by a float64 sum.
    kv_dtype "f16" rounds the cached K and V to f16 (what the f16 cache stores). q_f16 / p_f16
    additionally round the query and the probabilities to f16 (what llama.cpp's non-flash CPU path
    does when it multiplies against an f16 cache); the kernels' contract decides whether to set them.
    """
    q = np.asarray(q, dtype=np.float32)
    m = q.shape[0]
    hkv, _, d = k_cache.shape
    group = n_q_heads // hkv
    k = np.asarray(k_cache, dtype=np.float32)
    v = np.asarray(v_cache, dtype=np.float32)
    if kv_dtype == "f16":
        k = k.astype(np.float16).astype(np.float32)
        v = v.astype(np.float16).astype(np.float32)
    n_keys = pos0 + m
    qh = q.reshape(m, n_q_heads, d)
    if q_f16:
        qh = qh.astype(np.float16).astype(np.float32)
    p = np.arange(pos0, pos0 + m)[:, None]
    j = np.arange(n_keys)[None, :]
    visible = j <= p
    if window > 0:
        visible &= (p - j) < window
    y = np.empty((m, n_q_heads, d), dtype=np.float32)
    for h in range(n_q_heads):
        kh = k[h // group, :n_keys].astype(np.float64)
        vh = v[h // group, :n_keys].astype(np.float64)
        s = ((qh[:, h].astype(np.float64) @ kh.T).astype(np.float32) * np.float32(scale)).astype(np.float32)
        s = np.where(visible, s, np.float32(-np.inf))
        e = np.exp(s - s.max(axis=-1, keepdims=True)).astype(np.float32)
        inv = (1.0 / e.astype(np.float64).sum(axis=-1, keepdims=True)).astype(np.float32)
        pr = (e * inv).astype(np.float32)
        if p_f16:
            pr = pr.astype(np.float16).astype(np.float32)
        y[:, h] = (pr.astype(np.float64) @ vh).astype(np.float32)
    return y.reshape(m, n_q_heads * d)


def _gelu_tanh_f32(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float32)
    inner = (_SQRT_2_OVER_PI * x * (np.float32(1.0) + _GELU_A * x * x)).astype(np.float32)
    t = np.tanh(inner.astype(np.float64)).astype(np.float32)
    return (np.float32(0.5) * x * (np.float32(1.0) + t)).astype(np.float32)


def gelu_tanh(x: np.ndarray, rule: str = "f16_table") -> np.ndarray:
    """tanh-approximated GELU in float32: 0.5 x (1 + tanh(sqrt(2/pi) x (1 + 0.044715 x^2))).

    rule "f16_table" (the default; contract geglu.tanh.f32.v1 and llama.cpp's CPU evaluation):
    x <= -10 gives 0, x >= 10 gives x, otherwise round x to f16, evaluate the formula at that f16
    value and round the result to f16. rule "exact": the formula in float32 for every x.
    """
    x = np.asarray(x, dtype=np.float32)
    if rule == "exact":
        return _gelu_tanh_f32(x)
    if rule == "f16_table":
        xh = x.astype(np.float16).astype(np.float32)
        g = _gelu_tanh_f32(xh).astype(np.float16).astype(np.float32)
        return np.where(x <= -10.0, np.float32(0.0), np.where(x >= 10.0, x, g)).astype(np.float32)
    raise ValueError(f"unknown gelu rule {rule!r} (expected exact or f16_table)")


def geglu(gate: np.ndarray, up: np.ndarray, rule: str = "f16_table") -> np.ndarray:
    """y = gelu_tanh(gate) * up, float32."""
    return (gelu_tanh(gate, rule) * np.asarray(up, dtype=np.float32)).astype(np.float32)


def swiglu(gate: np.ndarray, up: np.ndarray) -> np.ndarray:
    """y = silu(gate) * up with silu(g) = g / (1 + exp(-g)), float32."""
    g = np.asarray(gate, dtype=np.float32)
    e = np.exp(-g.astype(np.float64)).astype(np.float32)
    return ((g / (np.float32(1.0) + e)) * np.asarray(up, dtype=np.float32)).astype(np.float32)


def residual_add(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """y = a + b, float32."""
    return (np.asarray(a, dtype=np.float32) + np.asarray(b, dtype=np.float32)).astype(np.float32)


def embedding(table: np.ndarray, ids: np.ndarray, t_type: str, scale: float = 1.0) -> np.ndarray:
    """y [M, D] = dequant(table[ids]) * scale (one float32 multiplication); table is raw GGML rows."""
    ids = np.asarray(ids, dtype=np.int64).reshape(-1)
    rows = dequantize_rows(np.asarray(table)[ids], t_type)
    return (rows * np.float32(scale)).astype(np.float32)


def argmax(x: np.ndarray) -> np.ndarray:
    """int32 [M]: index of each row's maximum, the lowest index on ties."""
    return np.asarray(x).argmax(axis=-1).astype(np.int32)
