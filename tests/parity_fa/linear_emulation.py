"""NumPy emulation of llama.cpp's x86 single-row quantized matmul for q5_0 and q8_0 weights (q8_0 activations).

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

__all__ = ["unpack_q5_0", "unpack_q8_0", "linear_q0"]


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


def linear_q0(x: np.ndarray, raw: np.ndarray, w_type: str, q8_0_rule: str = "x86") -> np.ndarray:
    """y [M, N] for q5_0 / q8_0 weights in llama.cpp's x86 single-row order (see the module docstring)."""
    wd, wq = {"q5_0": unpack_q5_0, "q8_0": unpack_q8_0}[w_type](raw)
    n, nb, _ = wq.shape
    x = np.atleast_2d(np.asarray(x, np.float32))
    out = np.empty((x.shape[0], n), np.float32)
    qr = ops.quantize_q8_0(x, q8_0_rule)
    xs = qr.qs.reshape(x.shape[0], nb, 32).astype(np.int32)
    xd = qr.d.reshape(x.shape[0], nb).astype(np.float32)
    for r in range(x.shape[0]):
        lanes = (wq * xs[r][None]).reshape(n, nb, 8, 4).sum(-1).astype(np.float64)
        dd = (wd * xd[r][None]).astype(np.float32).astype(np.float64)
        acc = np.zeros((n, 8), np.float32)
        for b in range(nb):
            acc = (dd[:, b, None] * lanes[:, b] + acc.astype(np.float64)).astype(np.float32)
        a4 = (acc[:, :4] + acc[:, 4:]).astype(np.float32)
        a2 = (a4[:, :2] + a4[:, 2:]).astype(np.float32)
        out[r] = (a2[:, 0] + a2[:, 1]).astype(np.float32)
    return out
