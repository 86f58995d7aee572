"""NumPy emulation of llama.cpp's x86 single-row quantized matmul: q5_0/q8_0 (q8_0 activations), q2_K/q4_K
(repacked), q3_K/q5_K/q6_K (vec_dot).

Input: activation rows f32 [M, K], raw GGML weight bytes [N, row_bytes] -> y f32 [M, N] with the
arithmetic of ggml's AVX2/AVX-512 vec_dot_q5_0_q8_0 / vec_dot_q8_0_q8_0 (and llamafile's tinyBLAS,
which sums the same way): per 32-block, 8 int32 lanes each holding 4 consecutive products; block
scale d = f32(d_w) * f32(d_x); lane accumulators acc = fma(d, float(lane), acc) in block order; the 8
lanes folded l+4, l+2, l+1. Activations are quantized by ops.quantize_q8_0 (rule "x86"). A parity
diagnostic, not a kernel; the fma is emulated in float64 (exact product, one rare double rounding).
"""

from __future__ import annotations

import numpy as np

from kernelmap.reference import ops

__all__ = ["unpack_q5_0", "unpack_q8_0", "unpack_q2_k", "unpack_q3_k", "unpack_q4_k", "unpack_q5_k", "unpack_q6_k",
           "linear_q0", "linear_q2_k", "linear_q2_k_repacked", "linear_q2_k_vec_dot", "linear_q3_k", "linear_q4_k",
           "linear_q4_k_repacked", "linear_q4_k_vec_dot", "linear_q5_k", "linear_q6_k"]


def unpack_q5_0(raw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """q5_0 bytes [N, nb*22] -> (d f32 [N, nb], q int32 [N, nb, 32] in -16..15)."""
    b = np.asarray(raw, np.uint8).reshape(raw.shape[0], -1, 22)
    d = b[:, :, 0:2].copy().view(np.float16)[..., 0].astype(np.float32)
    qh = b[:, :, 2:6].copy().view(np.uint32)[..., 0]
    qs = b[:, :, 6:22]
    bits = ((qh[..., None] >> np.arange(32, dtype=np.uint32)) & 1).astype(np.int32)
    lo = (qs & 0x0F).astype(np.int32) | (bits[..., :16] << 4)
    hi = (qs >> 4).astype(np.int32) | (bits[..., 16:] << 4)
    return d, np.concatenate([lo, hi], axis=-1) - 16


def unpack_q8_0(raw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """q8_0 bytes [N, nb*34] -> (d f32 [N, nb], q int32 [N, nb, 32])."""
    b = np.asarray(raw, np.uint8).reshape(raw.shape[0], -1, 34)
    d = b[:, :, 0:2].copy().view(np.float16)[..., 0].astype(np.float32)
    return d, b[:, :, 2:].copy().view(np.int8).astype(np.int32)


def linear_q0(x: np.ndarray, raw: np.ndarray, w_type: str, q8_0_rule: str = "x86", chunk: int = 8192) -> np.ndarray:
    """y [M, N] for q5_0 / q8_0 weights in llama.cpp's x86 single-row order (see the module docstring)."""
    unpack = {"q5_0": unpack_q5_0, "q8_0": unpack_q8_0}[w_type]
    x = np.atleast_2d(np.asarray(x, np.float32))
    n = raw.shape[0]
    nb = x.shape[1] // 32
    out = np.empty((x.shape[0], n), np.float32)
    qr = ops.quantize_q8_0(x, q8_0_rule)
    xs = qr.qs.reshape(x.shape[0], nb, 32).astype(np.int32)
    xd = qr.d.reshape(x.shape[0], nb).astype(np.float32)
    for c0 in range(0, n, chunk):
        wd, wq = unpack(raw[c0:c0 + chunk])
        for r in range(x.shape[0]):
            lanes = (wq * xs[r][None]).reshape(wq.shape[0], nb, 8, 4).sum(-1).astype(np.float64)
            dd = (wd * xd[r][None]).astype(np.float32).astype(np.float64)
            acc = np.zeros((wq.shape[0], 8), np.float32)
            for b in range(nb):
                acc = (dd[:, b, None] * lanes[:, b] + acc.astype(np.float64)).astype(np.float32)
            a4 = (acc[:, :4] + acc[:, 4:]).astype(np.float32)
            a2 = (a4[:, :2] + a4[:, 2:]).astype(np.float32)
            out[r, c0:c0 + wq.shape[0]] = (a2[:, 0] + a2[:, 1]).astype(np.float32)
    return out


def unpack_q4_k(raw: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """q4_K bytes [N, nb*144] -> (d, dmin f32 [N, nb], scales, mins int32 [N, nb, 8], q int32 [N, nb, 256])."""
    b = np.asarray(raw, np.uint8).reshape(raw.shape[0], -1, 144)
    n, nb = b.shape[:2]
    d = b[:, :, 0:2].copy().view(np.float16)[..., 0].astype(np.float32)
    dmin = b[:, :, 2:4].copy().view(np.float16)[..., 0].astype(np.float32)
    sc = b[:, :, 4:16].astype(np.int32)
    scales = np.zeros((n, nb, 8), np.int32)
    mins = np.zeros((n, nb, 8), np.int32)
    for j in range(8):
        if j < 4:
            scales[..., j] = sc[..., j] & 63
            mins[..., j] = sc[..., j + 4] & 63
        else:
            scales[..., j] = (sc[..., j + 4] & 0xF) | ((sc[..., j - 4] >> 6) << 4)
            mins[..., j] = (sc[..., j + 4] >> 4) | ((sc[..., j] >> 6) << 4)
    qs = b[:, :, 16:144].astype(np.int32)
    q = np.zeros((n, nb, 256), np.int32)
    for j in range(4):
        q[:, :, 64 * j:64 * j + 32] = qs[:, :, 32 * j:32 * j + 32] & 0xF
        q[:, :, 64 * j + 32:64 * j + 64] = qs[:, :, 32 * j:32 * j + 32] >> 4
    return d, dmin, scales, mins, q


def linear_q4_k_repacked(x: np.ndarray, raw: np.ndarray) -> np.ndarray:
    """y [M, N] for q4_K weights in llama.cpp's repacked (q4_K 8x8) single-row order, q8_K activations.

    Per column and superblock: exact integer sums isum = sum_sb scale_sb * sum(q * y) and
    imin = sum_sb min_sb * bsum_sb; acc = fma(float(isum), f32(d_w * d_x), acc) and
    accm = fma(float(imin), f32(dmin_w * d_x), accm) over superblocks in order; y = acc - accm.
    """
    d, dmin, scales, mins, q = unpack_q4_k(raw)
    n, nb, _ = q.shape
    x = np.atleast_2d(np.asarray(x, np.float32))
    qr = ops.quantize_q8_k(x)
    out = np.empty((x.shape[0], n), np.float32)
    for r in range(x.shape[0]):
        yq = qr.qs[r].reshape(nb, 256).astype(np.int32)
        yd = qr.d[r].reshape(nb).astype(np.float32)
        bs32 = qr.bsums[r].reshape(nb, 8, 2).astype(np.int32).sum(-1)
        acc = np.zeros(n, np.float32)
        accm = np.zeros(n, np.float32)
        for b in range(nb):
            isum = ((q[:, b] * yq[b][None]).reshape(n, 8, 32).sum(-1) * scales[:, b]).sum(-1)
            imin = (mins[:, b] * bs32[b][None]).sum(-1)
            dd = (d[:, b] * yd[b]).astype(np.float32).astype(np.float64)
            dm = (dmin[:, b] * yd[b]).astype(np.float32).astype(np.float64)
            acc = (isum.astype(np.float32).astype(np.float64) * dd + acc.astype(np.float64)).astype(np.float32)
            accm = (imin.astype(np.float32).astype(np.float64) * dm + accm.astype(np.float64)).astype(np.float32)
        out[r] = (acc - accm).astype(np.float32)
    return out


def unpack_q6_k(raw: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """q6_K bytes [N, nb*210] -> (d f32 [N, nb], scales int32 [N, nb, 16], u int32 [N, nb, 256] in 0..63)."""
    b = np.asarray(raw, np.uint8).reshape(raw.shape[0], -1, 210)
    n, nb = b.shape[:2]
    ql = b[..., 0:128].astype(np.int32)
    qh = b[..., 128:192].astype(np.int32)
    sc = b[..., 192:208].copy().view(np.int8).astype(np.int32)
    d = b[..., 208:210].copy().view(np.float16)[..., 0].astype(np.float32)
    u = np.zeros((n, nb, 256), np.int32)
    for h in range(2):
        lo, hb, base = ql[..., 64 * h:64 * h + 64], qh[..., 32 * h:32 * h + 32], 128 * h
        u[..., base:base + 32] = (lo[..., :32] & 15) | ((hb & 3) << 4)
        u[..., base + 32:base + 64] = (lo[..., 32:] & 15) | (((hb >> 2) & 3) << 4)
        u[..., base + 64:base + 96] = (lo[..., :32] >> 4) | (((hb >> 4) & 3) << 4)
        u[..., base + 96:base + 128] = (lo[..., 32:] >> 4) | (((hb >> 6) & 3) << 4)
    return d, sc, u


def linear_q6_k(x: np.ndarray, raw: np.ndarray) -> np.ndarray:
    """y [M, N] for q6_K weights in llama.cpp's x86 vec_dot_q6_K_q8_K order (not repacked), q8_K activations.

    Per superblock, 8 int32 lanes: lane l = sum over the eight 32-element chunks c of
    sc[e // 16] * u[e] * q8[e] for e = 32c + 4l .. 32c + 4l + 3 (u the unsigned 6-bit code), minus
    32 * (sc[2l] * bsum16[2l] + sc[2l+1] * bsum16[2l+1]); acc = fma(f32(d_w * d_x), float(lane), acc)
    over superblocks; lanes folded l+4, l+2, l+1. Matched llama.cpp's ffn_down outputs bit for bit.
    """
    d, sc, u = unpack_q6_k(raw)
    n, nb, _ = u.shape
    x = np.atleast_2d(np.asarray(x, np.float32))
    qr = ops.quantize_q8_k(x)
    out = np.empty((x.shape[0], n), np.float32)
    for r in range(x.shape[0]):
        yq = qr.qs[r].reshape(nb, 256).astype(np.int32)
        yd = qr.d[r].reshape(nb).astype(np.float32)
        acc = np.zeros((n, 8), np.float32)
        for b in range(nb):
            prod = u[:, b] * yq[b][None] * np.repeat(sc[:, b], 16, axis=1)
            lanes = prod.reshape(n, 8, 8, 4).sum(-1).sum(1)
            off = 32 * (sc[:, b] * yq[b].reshape(16, 16).sum(-1)[None]).reshape(n, 8, 2).sum(-1)
            dd = (d[:, b] * yd[b]).astype(np.float32).astype(np.float64)
            acc = (dd[:, None] * (lanes - off).astype(np.float32).astype(np.float64)
                   + acc.astype(np.float64)).astype(np.float32)
        a4 = (acc[:, :4] + acc[:, 4:]).astype(np.float32)
        a2 = (a4[:, :2] + a4[:, 2:]).astype(np.float32)
        out[r] = (a2[:, 0] + a2[:, 1]).astype(np.float32)
    return out


def _fma32(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """f32 fma emulated in float64 (exact product of two f32; one rare double rounding)."""
    return (np.asarray(a, np.float32).astype(np.float64) * np.asarray(b, np.float32).astype(np.float64)
            + np.asarray(c, np.float32).astype(np.float64)).astype(np.float32)


def _fold8(acc: np.ndarray) -> np.ndarray:
    a4 = (acc[..., :4] + acc[..., 4:]).astype(np.float32)
    a2 = (a4[..., :2] + a4[..., 2:]).astype(np.float32)
    return (a2[..., 0] + a2[..., 1]).astype(np.float32)


def _by_row(x: np.ndarray, n: int, nb: int, row) -> np.ndarray:
    """y [M, n]: x's rows quantized to q8_K (ops.quantize_q8_k), each passed to row(yq int32 [nb, 256],
    yd f32 [nb], bsums int32 [nb, 16]) -> y row [n]."""
    x = np.atleast_2d(np.asarray(x, np.float32))
    qr = ops.quantize_q8_k(x)
    out = np.empty((x.shape[0], n), np.float32)
    for r in range(x.shape[0]):
        out[r] = row(qr.qs[r].reshape(nb, 256).astype(np.int32), qr.d[r].reshape(nb).astype(np.float32),
                     qr.bsums[r].reshape(nb, 16).astype(np.int32))
    return out


def unpack_q2_k(raw: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """q2_K bytes [N, nb*84] -> (d, dmin f32 [N, nb], scales, mins int32 [N, nb, 16], q int32 [N, nb, 256] in 0..3)."""
    b = np.asarray(raw, np.uint8).reshape(raw.shape[0], -1, 84)
    n, nb = b.shape[:2]
    sm = b[..., 0:16].astype(np.int32)
    qs = b[..., 16:80].astype(np.int32)
    d = b[..., 80:82].copy().view(np.float16)[..., 0].astype(np.float32)
    dmin = b[..., 82:84].copy().view(np.float16)[..., 0].astype(np.float32)
    q = np.zeros((n, nb, 256), np.int32)
    for h in range(2):
        for k in range(4):
            q[..., 128 * h + 32 * k:128 * h + 32 * k + 32] = (qs[..., 32 * h:32 * h + 32] >> (2 * k)) & 3
    return d, dmin, sm & 15, sm >> 4, q


def unpack_q3_k(raw: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """q3_K bytes [N, nb*110] -> (d f32 [N, nb], signed scales int32 [N, nb, 16], q int32 [N, nb, 256] in -4..3)."""
    b = np.asarray(raw, np.uint8).reshape(raw.shape[0], -1, 110)
    n, nb = b.shape[:2]
    hm = b[..., 0:32].astype(np.int32)
    qs = b[..., 32:96].astype(np.int32)
    sb = b[..., 96:108].astype(np.int32)
    d = b[..., 108:110].copy().view(np.float16)[..., 0].astype(np.float32)
    sc = np.zeros((n, nb, 16), np.int32)
    for j in range(16):
        low = sb[..., j] & 15 if j < 8 else sb[..., j - 8] >> 4
        sc[..., j] = (low | (((sb[..., 8 + j % 4] >> (2 * (j // 4))) & 3) << 4)) - 32
    q = np.zeros((n, nb, 256), np.int32)
    for h in range(2):
        for k in range(4):
            low = (qs[..., 32 * h:32 * h + 32] >> (2 * k)) & 3
            q[..., 128 * h + 32 * k:128 * h + 32 * k + 32] = low - 4 * (1 - ((hm >> (4 * h + k)) & 1))
    return d, sc, q


def unpack_q5_k(raw: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """q5_K bytes [N, nb*176] -> (d, dmin f32 [N, nb], scales, mins int32 [N, nb, 8], u int32 [N, nb, 256] in 0..31)."""
    b = np.asarray(raw, np.uint8).reshape(raw.shape[0], -1, 176)
    as_q4 = np.concatenate([b[..., 0:16], b[..., 48:176]], axis=-1)  # d, dmin, scales, qs: q4_K's layout
    d, dmin, scales, mins, lo = unpack_q4_k(as_q4.reshape(raw.shape[0], -1))
    qh = b[..., 16:48].astype(np.int32)
    u = lo.copy()
    for c in range(8):
        u[..., 32 * c:32 * c + 32] += 16 * ((qh >> c) & 1)
    return d, dmin, scales, mins, u


def linear_q2_k_repacked(x: np.ndarray, raw: np.ndarray) -> np.ndarray:
    """y [M, N] for q2_K weights in llama.cpp's repacked (q2_K 8x8, AVX-512 build) order, q8_K activations:
    per column and superblock exact isum = sum_j sc_j * sum(q * y over the 16 values of j) and
    imin = sum_j min_j * bsum_j; acc = fma(float(isum), f32(d_w * d_x), acc), accm = fma(float(imin),
    f32(dmin_w * d_x), accm); y = acc - accm (the q4_K shape)."""
    d, dmin, scales, mins, q = unpack_q2_k(raw)
    n, nb, _ = q.shape

    def row(yq, yd, bs):
        acc = np.zeros(n, np.float32)
        accm = np.zeros(n, np.float32)
        for b in range(nb):
            isum = ((q[:, b] * yq[b][None]).reshape(n, 16, 16).sum(-1) * scales[:, b]).sum(-1)
            imin = (mins[:, b] * bs[b][None]).sum(-1)
            acc = _fma32(isum.astype(np.float32), (d[:, b] * yd[b]).astype(np.float32), acc)
            accm = _fma32(imin.astype(np.float32), (dmin[:, b] * yd[b]).astype(np.float32), accm)
        return (acc - accm).astype(np.float32)

    return _by_row(x, n, nb, row)


def _vec_dot_lanes(codes: np.ndarray, yq: np.ndarray, sc16: np.ndarray) -> np.ndarray:
    """The 8 int32 lanes of llama.cpp's x86 K-quant vec_dot: lane l = sum over chunks c of sc[e // 16] *
    q[e] * y[e], e = 32c + 4l .. 32c + 4l + 3 (codes [N, 256], yq [256], sc16 [N, 16]) -> [N, 8]."""
    prod = codes * yq[None] * np.repeat(sc16, 16, axis=1)
    return prod.reshape(codes.shape[0], 8, 8, 4).sum(-1).sum(1)


def linear_q3_k(x: np.ndarray, raw: np.ndarray) -> np.ndarray:
    """y [M, N] for q3_K weights in llama.cpp's x86 vec_dot_q3_K_q8_K order: 8 exact int32 lanes per
    superblock (signed codes, signed 16-value scales), acc = fma(f32(d_x * d_w), float(lane), acc) over
    superblocks; lanes folded l+4, l+2, l+1."""
    d, sc, q = unpack_q3_k(raw)
    n, nb, _ = q.shape

    def row(yq, yd, _bs):
        acc = np.zeros((n, 8), np.float32)
        for b in range(nb):
            lanes = _vec_dot_lanes(q[:, b], yq[b], sc[:, b])
            acc = _fma32((yd[b] * d[:, b]).astype(np.float32)[:, None], lanes.astype(np.float32), acc)
        return _fold8(acc)

    return _by_row(x, n, nb, row)


def linear_q5_k(x: np.ndarray, raw: np.ndarray) -> np.ndarray:
    """y [M, N] for q5_K weights in llama.cpp's x86 vec_dot_q5_K_q8_K order: 8 exact int32 lanes per
    superblock (32-value scales) into acc = fma(f32(d_x * d_w), float(lane), acc), and one f32 min chain
    summ = fma(float(imin), -f32(d_x * dmin_w), summ) with imin = sum_j min_j * (bsum_2j + bsum_2j+1);
    y = fold(acc) + summ."""
    d, dmin, scales, mins, u = unpack_q5_k(raw)
    n, nb, _ = u.shape

    def row(yq, yd, bs):
        bs32 = bs.reshape(nb, 8, 2).sum(-1)
        acc = np.zeros((n, 8), np.float32)
        summ = np.zeros(n, np.float32)
        for b in range(nb):
            lanes = _vec_dot_lanes(u[:, b], yq[b], np.repeat(scales[:, b], 2, axis=1))
            acc = _fma32((yd[b] * d[:, b]).astype(np.float32)[:, None], lanes.astype(np.float32), acc)
            imin = (mins[:, b] * bs32[b][None]).sum(-1)
            summ = _fma32(imin.astype(np.float32), -(yd[b] * dmin[:, b]).astype(np.float32), summ)
        return (_fold8(acc) + summ).astype(np.float32)

    return _by_row(x, n, nb, row)


def linear_q2_k_vec_dot(x: np.ndarray, raw: np.ndarray) -> np.ndarray:
    """y [M, N] for q2_K weights in llama.cpp's x86 vec_dot_q2_K_q8_K order (tensors it does not repack): per
    superblock the min lanes first, acc = fma(-f32(d_x * dmin_w), float(P), acc) with P[l] = min_2l * bsum_2l +
    min_2l+1 * bsum_2l+1, then acc = fma(f32(d_x * d_w), float(lane), acc); lanes folded l+4, l+2, l+1."""
    d, dmin, scales, mins, q = unpack_q2_k(raw)
    n, nb, _ = q.shape

    def row(yq, yd, bs):
        acc = np.zeros((n, 8), np.float32)
        for b in range(nb):
            p = (mins[:, b] * bs[b][None]).reshape(n, 8, 2).sum(-1)
            acc = _fma32(-(yd[b] * dmin[:, b]).astype(np.float32)[:, None], p.astype(np.float32), acc)
            lanes = _vec_dot_lanes(q[:, b], yq[b], scales[:, b])
            acc = _fma32((yd[b] * d[:, b]).astype(np.float32)[:, None], lanes.astype(np.float32), acc)
        return _fold8(acc)

    return _by_row(x, n, nb, row)


def linear_q4_k_vec_dot(x: np.ndarray, raw: np.ndarray) -> np.ndarray:
    """y [M, N] for q4_K weights in llama.cpp's x86 vec_dot_q4_K_q8_K order (tensors it does not repack): 8
    lanes acc = fma(f32(d_x * d_w), float(lane), acc) and a 4-lane min chain accm = fma(-f32(d_x * dmin_w),
    float(P4), accm) with P4[k] = min_2k * ps_2k + min_2k+1 * ps_2k+1 (ps: bsum pair sums);
    y = fold8(acc) + ((accm0 + accm2) + (accm1 + accm3))."""
    d, dmin, scales, mins, q = unpack_q4_k(raw)
    n, nb, _ = q.shape

    def row(yq, yd, bs):
        bs32 = bs.reshape(nb, 8, 2).sum(-1)
        acc = np.zeros((n, 8), np.float32)
        accm = np.zeros((n, 4), np.float32)
        for b in range(nb):
            p4 = (mins[:, b] * bs32[b][None]).reshape(n, 4, 2).sum(-1)
            accm = _fma32(-(yd[b] * dmin[:, b]).astype(np.float32)[:, None], p4.astype(np.float32), accm)
            lanes = _vec_dot_lanes(q[:, b], yq[b], np.repeat(scales[:, b], 2, axis=1))
            acc = _fma32((yd[b] * d[:, b]).astype(np.float32)[:, None], lanes.astype(np.float32), acc)
        m2 = (accm[:, :2] + accm[:, 2:]).astype(np.float32)
        return (_fold8(acc) + (m2[:, 0] + m2[:, 1]).astype(np.float32)).astype(np.float32)

    return _by_row(x, n, nb, row)


def linear_q2_k(x: np.ndarray, raw: np.ndarray) -> np.ndarray:
    """llama.cpp's x86 (AVX-512 build) q2_K matmul: repacked order when the weight has N % 8 == 0 rows, else vec_dot."""
    return linear_q2_k_repacked(x, raw) if raw.shape[0] % 8 == 0 else linear_q2_k_vec_dot(x, raw)


def linear_q4_k(x: np.ndarray, raw: np.ndarray) -> np.ndarray:
    """llama.cpp's x86 q4_K matmul: repacked order when the weight has N % 8 == 0 rows, else vec_dot."""
    return linear_q4_k_repacked(x, raw) if raw.shape[0] % 8 == 0 else linear_q4_k_vec_dot(x, raw)
