"""NumPy statement of llama.cpp's x86 arithmetic for the legacy 32-element and the float weight types.

Input: f32 activation rows and raw GGML weight bytes -> what llama.cpp 0.3.36's AVX-512 build computes for a
one-row MUL_MAT (and its activation quantizers / conversions), written independently of the C kernels from
ggml-cpu's sources and the peer's disassembly:
- quantize_q8_1: quantize_row_q8_1 (x86): per 32-block amax, d = amax / 127, id = 127 / amax, q = rint(x * id),
  d and s = d * sum(q) stored as f16 (round to nearest even).
- linear_q32: vec_dot_{q4_0_q8_0, q4_1_q8_1, q5_1_q8_1}: 8 int32 lanes of 4 consecutive products per block,
  acc[l] = fma(f32(dw * dx), lane, acc[l]) in block order, folded l+4, l+2, l+1; q4_1 / q5_1 add a scalar
  chain summs = fma(m_w, s_x, summs) after the fold: y = fold(acc) + summs.
- linear_q4_0_x8: ggml_gemv_q4_0_8x8_q8_0 (weights repacked, N % 8 == 0): one chain per column,
  acc = fma(float(sum of the block's 32 products), f32(dw * dx), acc); y = acc.
- linear_iq4_nl: iq4_nl weights (each nibble indexes the 16-entry value table) against q8_0 activations, two
  orders chosen by N as llama.cpp chooses them: N % 8 == 0, ggml_gemv_iq4_nl_8x8_q8_0 on the repacked weight (one
  chain per column, as linear_q4_0_x8); otherwise ggml_vec_dot_iq4_nl_q8_0: 8 lanes of 4 consecutive products,
  blocks alternating between two accumulators (even blocks acc1, odd acc2), y = fold(acc1 + acc2), then an odd
  last block as y = fma(f32(dw * dx), float(its 32-product sum), y).
- linear_float: ggml_vec_dot_f16 / _f32 (64 lanes: 4 x 16, fma; sums (s0+s2)+(s1+s3) then halves, quarters,
  pairs; the K % 64 tail as the peer's binary does it) and ggml_vec_dot_bf16 (vdpbf16ps with DAZ/FTZ, two
  16-lane accumulators reduced separately and added in double).
A test oracle, not a kernel; every fma is exactly rounded (fma32).
"""

from __future__ import annotations

import numpy as np

__all__ = ["fma32", "unpack_q32", "quantize_q8_0", "quantize_q8_1", "linear_q32", "linear_q4_0_x8", "IQ4_NL_VALUES",
           "unpack_iq4_nl", "linear_iq4_nl",
           "to_f16", "to_bf16", "bf16_to_f32", "linear_float", "reduce16", "dequantize_q32", "BLOCK"]

BLOCK = {"q4_0": 18, "q4_1": 20, "q5_0": 22, "q5_1": 24, "q8_0": 34, "q8_1": 36}
F32 = np.float32


def fma32(a, b, c) -> np.ndarray:
    """Exactly rounded f32 a * b + c (element-wise, broadcast, finite f32 inputs): the f64 product is exact; the
    f64 sum's error is recovered exactly (TwoSum) and decides the one case where rounding f64 -> f32 could go
    the wrong way (the f64 sum lands exactly on an f32 midpoint)."""
    a64, b64, c64 = np.broadcast_arrays(*(np.asarray(v, F32).astype(np.float64) for v in (a, b, c)))
    p = a64 * b64
    s = p + c64
    bb = s - p
    e = (p - (s - bb)) + (c64 - bb)
    r = s.astype(F32)
    r64 = r.astype(np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        up = np.nextafter(r, np.where(s > r64, F32(np.inf), F32(-np.inf)).astype(F32))
        up64 = up.astype(np.float64)
        tie = (s != r64) & (s == (r64 + up64) / 2) & (e != 0)
        toward_up = (e > 0) == (up64 > r64)
    return np.where(tie & toward_up, up, r).astype(F32)


def _half(b: np.ndarray) -> np.ndarray:
    return b.copy().view(np.float16)[..., 0].astype(F32)


def unpack_q32(raw: np.ndarray, typ: str) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Weight bytes [N, nb * block] -> (d f32 [N, nb], integer codes int32 [N, nb, 32], m f32 [N, nb] or None).
    Codes are the signed weights for q4_0 (nibble - 8), q5_0 (code - 16), q8_0; the unsigned ones for q4_1, q5_1."""
    blk = BLOCK[typ]
    b = np.asarray(raw, np.uint8).reshape(raw.shape[0], -1, blk)
    d = _half(b[..., 0:2])
    m = _half(b[..., 2:4]) if typ in ("q4_1", "q5_1") else None
    if typ == "q8_0":
        return d, b[..., 2:].copy().view(np.int8).astype(np.int32), None
    qs_off = {"q4_0": 2, "q4_1": 4, "q5_0": 6, "q5_1": 8}[typ]
    qs = b[..., qs_off:qs_off + 16].astype(np.int32)
    q = np.concatenate([qs & 0x0F, qs >> 4], axis=-1)
    if typ in ("q5_0", "q5_1"):
        qh_off = 2 if typ == "q5_0" else 4
        qh = b[..., qh_off:qh_off + 4].copy().view(np.uint32)[..., 0]
        q |= (((qh[..., None] >> np.arange(32, dtype=np.uint32)) & 1) << 4).astype(np.int32)
    off = {"q4_0": 8, "q5_0": 16}.get(typ, 0)
    return d, q - off, m


def quantize_q8_0(x: np.ndarray) -> np.ndarray:
    """quantize_row_q8_0 (x86) of f32 rows [M, K] -> q8_0 bytes [M, K / 32 * 34]."""
    return _quantize(x, with_sum=False)


def quantize_q8_1(x: np.ndarray) -> np.ndarray:
    """quantize_row_q8_1 (x86) of f32 rows [M, K] -> q8_1 bytes [M, K / 32 * 36] (d, s = d * sum(q), qs)."""
    return _quantize(x, with_sum=True)


def _quantize(x: np.ndarray, with_sum: bool) -> np.ndarray:
    x = np.atleast_2d(np.asarray(x, F32))
    m, k = x.shape
    xb = x.reshape(m, k // 32, 32)
    amax = np.abs(xb).max(-1)
    with np.errstate(divide="ignore"):
        d = (amax / F32(127)).astype(F32)
        idv = np.where(amax != 0, (F32(127) / amax).astype(F32), F32(0)).astype(F32)
    q = np.rint((xb * idv[..., None]).astype(F32)).astype(np.int32)
    head = 4 if with_sum else 2
    out = np.zeros((m, k // 32, head + 32), np.uint8)
    out[..., 0:2] = d.astype(np.float16)[..., None].view(np.uint8)
    if with_sum:
        s = (d * q.sum(-1).astype(F32)).astype(F32)
        out[..., 2:4] = s.astype(np.float16)[..., None].view(np.uint8)
    out[..., head:] = q.astype(np.int8).view(np.uint8)
    return out.reshape(m, -1)


def _act(xq: np.ndarray, act: str) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """q8_0 / q8_1 bytes [M, nb * block] -> (d f32 [M, nb], q int32 [M, nb, 32], s f32 [M, nb] or None)."""
    head = 4 if act == "q8_1" else 2
    b = np.asarray(xq, np.uint8).reshape(xq.shape[0], -1, head + 32)
    s = _half(b[..., 2:4]) if act == "q8_1" else None
    return _half(b[..., 0:2]), b[..., head:].copy().view(np.int8).astype(np.int32), s


def _fold8(acc: np.ndarray) -> np.ndarray:
    h = (acc[..., :4] + acc[..., 4:]).astype(F32)
    g = (h[..., :2] + h[..., 2:]).astype(F32)
    return (g[..., 0] + g[..., 1]).astype(F32)


def linear_q32(xq: np.ndarray, raw: np.ndarray, typ: str) -> np.ndarray:
    """y [M, N]: vec_dot_<typ>_q8_{0,1} of quantized activation rows xq (q8_0 for q4_0/q5_0/q8_0, q8_1 for
    q4_1/q5_1) against weight rows raw."""
    act = "q8_1" if typ in ("q4_1", "q5_1") else "q8_0"
    wd, wq, wm = unpack_q32(raw, typ)
    xd, xqs, xs = _act(xq, act)
    n, nb = wd.shape
    out = np.zeros((xd.shape[0], n), F32)
    for r in range(xd.shape[0]):
        lanes = (wq * xqs[r][None]).reshape(n, nb, 8, 4).sum(-1).astype(F32)
        t = (wd * xd[r][None]).astype(F32)
        acc = np.zeros((n, 8), F32)
        summs = np.zeros(n, F32)
        for b in range(nb):
            acc = fma32(t[:, b, None], lanes[:, b], acc)
            if wm is not None:
                summs = fma32(wm[:, b], np.full(n, xs[r, b], F32), summs)
        y = _fold8(acc)
        out[r] = (y + summs).astype(F32) if wm is not None else y
    return out


def linear_q4_0_x8(xq: np.ndarray, raw: np.ndarray) -> np.ndarray:
    """y [M, N]: ggml_gemv_q4_0_8x8_q8_0 (the repacked q4_0 path): per column one fma chain over blocks."""
    wd, wq, _ = unpack_q32(raw, "q4_0")
    xd, xqs, _ = _act(xq, "q8_0")
    n, nb = wd.shape
    out = np.zeros((xd.shape[0], n), F32)
    for r in range(xd.shape[0]):
        isum = (wq * xqs[r][None]).sum(-1).astype(F32)
        t = (wd * xd[r][None]).astype(F32)
        acc = np.zeros(n, F32)
        for b in range(nb):
            acc = fma32(isum[:, b], t[:, b], acc)
        out[r] = acc
    return out


IQ4_NL_VALUES = np.array([-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113], np.int32)


def unpack_iq4_nl(raw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """iq4_nl bytes [N, nb * 18] -> (d f32 [N, nb], values int32 [N, nb, 32]): value i the table entry of byte i's
    low nibble, value 16 + i of its high nibble."""
    b = np.asarray(raw, np.uint8).reshape(raw.shape[0], -1, 18)
    qs = b[..., 2:18].astype(np.int32)
    return _half(b[..., 0:2]), np.concatenate([IQ4_NL_VALUES[qs & 15], IQ4_NL_VALUES[qs >> 4]], axis=-1)


def linear_iq4_nl(xq: np.ndarray, raw: np.ndarray) -> np.ndarray:
    """y [M, N]: llama.cpp's iq4_nl matmul of q8_0 activation rows xq against iq4_nl weight rows raw."""
    wd, wq = unpack_iq4_nl(raw)
    xd, xqs, _ = _act(xq, "q8_0")
    n, nb = wd.shape
    out = np.zeros((xd.shape[0], n), F32)
    for r in range(xd.shape[0]):
        prod = wq * xqs[r][None]
        t = (wd * xd[r][None]).astype(F32)
        if n % 8 == 0:
            isum = prod.sum(-1).astype(F32)
            acc = np.zeros(n, F32)
            for b in range(nb):
                acc = fma32(isum[:, b], t[:, b], acc)
            out[r] = acc
            continue
        lanes = prod.reshape(n, nb, 8, 4).sum(-1).astype(F32)
        acc = np.zeros((2, n, 8), F32)
        for b in range(nb - nb % 2):
            acc[b % 2] = fma32(t[:, b, None], lanes[:, b], acc[b % 2])
        y = _fold8((acc[0] + acc[1]).astype(F32))
        if nb % 2:
            y = fma32(t[:, nb - 1], prod[:, nb - 1].sum(-1).astype(F32), y)
        out[r] = y
    return out


def to_f16(x: np.ndarray) -> np.ndarray:
    """f32 -> IEEE half bits (round to nearest even, as vcvtps2ph imm 0)."""
    return np.asarray(x, F32).astype(np.float16).view(np.uint16)


def to_bf16(x: np.ndarray) -> np.ndarray:
    """f32 -> bf16 bits as ggml_compute_fp32_to_bf16: NaN quieted, else round to nearest even (no flush)."""
    u = np.asarray(x, F32).view(np.uint32).astype(np.uint64)
    nan = (u & 0x7FFFFFFF) > 0x7F800000
    r = ((u + (0x7FFF + ((u >> 16) & 1))) >> 16) & 0xFFFF
    return np.where(nan, (u >> 16) | 64, r).astype(np.uint16)


def bf16_to_f32(h: np.ndarray) -> np.ndarray:
    return (np.asarray(h, np.uint16).astype(np.uint32) << 16).view(F32)


def reduce16(v: np.ndarray) -> np.ndarray:
    """GCC's _mm512_reduce_add_ps of [..., 16]: halves (l, l+8), then l + 4, l + 2, l + 1."""
    h = (v[..., :8] + v[..., 8:]).astype(F32)
    return _fold8(h)


def _ftz(v: np.ndarray) -> np.ndarray:
    v = np.asarray(v, F32)
    return np.where(np.abs(v) < np.finfo(F32).tiny, (v * F32(0)).astype(F32), v).astype(F32)


def linear_float(xt: np.ndarray, wt: np.ndarray, typ: str) -> np.ndarray:
    """y [M, N]: ggml_vec_dot_<typ> of activation rows xt (already in the weight's type: f16 / bf16 bits, or f32)
    against weight rows wt of the same type. typ "<t>_dot32": ggml_vec_dot_<t> of llama.cpp's AVX2 build (four
    8-lane accumulators by fma over K - K % 32, P = (a0 + a2) + (a1 + a3), T[l] = P[l] + P[l + 4]; f16 and f32
    (T0 + T1) + (T2 + T3), bf16 (T0 + T2) + (T1 + T3); the tail in double (f16, bf16) or as the f32 binary's)."""
    f16 = lambda a: np.asarray(a, np.uint16).view(np.float16).astype(F32)  # noqa: E731
    f32 = lambda a: np.asarray(a, F32)  # noqa: E731
    conv = {"f16": f16, "f16_dot32": f16, "bf16": bf16_to_f32, "bf16_dot32": bf16_to_f32, "f32": f32,
            "f32_dot32": f32}[typ]
    x, w = conv(np.atleast_2d(xt)), conv(np.atleast_2d(wt))
    m, k = x.shape
    n = w.shape[0]
    if typ.endswith("_dot32"):
        out = np.zeros((m, n), F32)
        np32 = k - k % 32
        for r in range(m):
            acc = np.zeros((n, 4, 8), F32)
            for i in range(0, np32, 32):
                acc = fma32(w[:, i:i + 32].reshape(n, 4, 8), x[r, i:i + 32].reshape(1, 4, 8), acc)
            p = ((acc[:, 0] + acc[:, 2]).astype(F32) + (acc[:, 1] + acc[:, 3]).astype(F32)).astype(F32)
            t = (p[:, :4] + p[:, 4:]).astype(F32)
            if typ == "bf16_dot32":
                red = ((t[:, 0] + t[:, 2]).astype(F32) + (t[:, 1] + t[:, 3]).astype(F32)).astype(F32)
            else:
                red = ((t[:, 0] + t[:, 1]).astype(F32) + (t[:, 2] + t[:, 3]).astype(F32)).astype(F32)
            if typ == "f32_dot32":
                out[r] = _f32_tail(red, w[:, np32:], x[r, np32:])
                continue
            s = red.astype(np.float64)
            for i in range(np32, k):
                s = s + (w[:, i] * x[r, i]).astype(F32).astype(np.float64)
            out[r] = s.astype(F32)
        return out
    np_ = k - k % 64
    out = np.zeros((m, n), F32)
    for r in range(m):
        if typ == "bf16":
            c = np.zeros((n, 2, 16), F32)  # c1 over [i, i + 32), c2 over [i + 32, i + 64)
            for i in range(0, np_, 64):
                xw = _daz(w[:, i:i + 64].reshape(n, 2, 16, 2))
                xx = _daz(x[r, i:i + 64].reshape(1, 2, 16, 2))
                c = _ftz(fma32(xw[..., 1], xx[..., 1], _daz(c)))
                c = _ftz(fma32(xw[..., 0], xx[..., 0], _daz(c)))
            s = reduce16(c[:, 0]).astype(np.float64) + 0.0
            s = s + reduce16(c[:, 1]).astype(np.float64)
            for i in range(np_, k):
                s = s + (w[:, i] * x[r, i]).astype(F32).astype(np.float64)
            out[r] = s.astype(F32)
            continue
        acc = np.zeros((n, 4, 16), F32)
        for i in range(0, np_, 64):
            acc = fma32(w[:, i:i + 64].reshape(n, 4, 16), x[r, i:i + 64].reshape(1, 4, 16), acc)
        t = ((acc[:, 0] + acc[:, 2]).astype(F32) + (acc[:, 1] + acc[:, 3]).astype(F32)).astype(F32)
        red = reduce16(t)
        if typ == "f16":
            s = red.astype(np.float64)
            for i in range(np_, k):
                s = s + (w[:, i] * x[r, i]).astype(F32).astype(np.float64)
            out[r] = s.astype(F32)
        else:
            out[r] = _f32_tail(red, w[:, np_:], x[r, np_:])
    return out


def _f32_tail(s: np.ndarray, w: np.ndarray, x: np.ndarray) -> np.ndarray:
    """The peer binary's ggml_vec_dot_f32 tail (GCC-vectorized): groups of 16 then one of 8 as rounded products
    added in order, the last < 8 elements by fma."""
    s = np.asarray(s, F32).copy()
    t, i = x.size, 0
    while t - i >= 16:
        for j in range(16):
            s = (s + (w[:, i + j] * x[i + j]).astype(F32)).astype(F32)
        i += 16
    if t - i >= 8:
        for j in range(8):
            s = (s + (w[:, i + j] * x[i + j]).astype(F32)).astype(F32)
        i += 8
    for j in range(i, t):
        s = fma32(w[:, j], np.full(s.shape, x[j], F32), s)
    return s


def _daz(v: np.ndarray) -> np.ndarray:
    v = np.asarray(v, F32)
    return np.where(np.abs(v) < np.finfo(F32).tiny, (v * F32(0)).astype(F32), v).astype(F32)


def dequantize_q32(raw: np.ndarray, typ: str) -> np.ndarray:
    """dequantize_row_<typ> (ggml-base, no FMA): q4_0/q5_0/q8_0 code * d; q4_1/q5_1 code * d + m."""
    d, q, m = unpack_q32(raw, typ)
    v = (q.astype(F32) * d[..., None]).astype(F32)
    if m is not None:
        v = (v + m[..., None]).astype(F32)
    return v.reshape(raw.shape[0], -1)
