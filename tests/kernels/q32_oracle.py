"""NumPy oracles for the 32-block kernels (owned by the q32 linear, q8_0 quantizer and embedding tests).

Input: NumPy arrays of raw GGML blocks and f32 activations -> the values the contracts promise,
computed independently of the C code: structured block dtypes, random block generators, and an
exactly rounded f32 fused multiply-add (Python 3.11 has no math.fma) for the linear contract.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

__all__ = [
    "Q8_0",
    "Q4_0",
    "Q5_0",
    "BLOCK_DTYPES",
    "random_blocks",
    "fma_f32",
    "unpack_q32",
    "linear_q32_numpy",
    "linear_float_numpy",
]

Q8_0 = np.dtype([("d", "<f2"), ("qs", "i1", (32,))])
Q4_0 = np.dtype([("d", "<f2"), ("qs", "u1", (16,))])
Q5_0 = np.dtype([("d", "<f2"), ("qh", "<u4"), ("qs", "u1", (16,))])
BLOCK_DTYPES = {"q8_0": Q8_0, "q4_0": Q4_0, "q5_0": Q5_0}
assert (Q8_0.itemsize, Q4_0.itemsize, Q5_0.itemsize) == (34, 18, 22)


def random_blocks(rng: np.random.Generator, fmt: str, shape: tuple[int, ...], dscale: float = 0.01,
                  qmin: int = -128) -> np.ndarray:
    """Blocks with random quant bytes and f16 scales of magnitude ~dscale (both signs)."""
    dt = BLOCK_DTYPES[fmt]
    raw = rng.integers(0, 256, size=(*shape, dt.itemsize), dtype=np.uint8)
    blocks = raw.view(dt).reshape(shape).copy()
    blocks["d"] = (rng.uniform(0.25, 1.0, shape) * rng.choice([-1.0, 1.0], shape) * dscale).astype(np.float16)
    if fmt == "q8_0":
        blocks["qs"] = np.clip(blocks["qs"], qmin, 127)
    return blocks


def unpack_q32(blocks: np.ndarray, fmt: str) -> np.ndarray:
    """Integer quants (int64, [..., 32]) of q8_0 / q4_0 / q5_0 blocks."""
    if fmt == "q8_0":
        return blocks["qs"].astype(np.int64)
    qs = blocks["qs"].astype(np.int64)
    q = np.concatenate([qs & 0x0F, qs >> 4], axis=-1)
    if fmt == "q4_0":
        return q - 8
    bits = (blocks["qh"].astype(np.int64)[..., None] >> np.arange(32)) & 1
    return (q | (bits << 4)) - 16


def fma_f32(a: float, b: float, c: float) -> np.float32:
    """Exactly rounded (nearest-even) f32 a*b + c for finite f32 inputs."""
    exact = Fraction(float(a)) * Fraction(float(b)) + Fraction(float(c))
    r = np.float32(float(exact))
    cands = [np.nextafter(r, np.float32(-np.inf)), r, np.nextafter(r, np.float32(np.inf))]
    best = None
    for cand in cands:
        err = abs(Fraction(float(cand)) - exact)
        even = (int(np.array(cand, dtype=np.float32).view(np.uint32)) & 1) == 0
        key = (err, not even)
        if best is None or key < best[0]:
            best = (key, cand)
    assert best is not None
    result = np.float32(best[1])
    if result == 0 and exact == 0:
        return np.float32(0.0)
    return result


def _tree8(p: list[np.float32]) -> np.float32:
    f = np.float32
    return f(f(f(p[0] + p[4]) + f(p[2] + p[6])) + f(f(p[1] + p[5]) + f(p[3] + p[7])))


def linear_q32_numpy(w: np.ndarray, wfmt: str, x: np.ndarray) -> np.ndarray:
    """The linear.<w>.q8_0.f32.v1 contract: w blocks [N, nb], x q8_0 blocks [M, nb] -> y f32 [M, N]."""
    wq = unpack_q32(w, wfmt)
    xq = x["qs"].astype(np.int64)
    isum = np.einsum("nbi,mbi->mnb", wq, xq)
    t = (w["d"].astype(np.float32)[None, :, :] * x["d"].astype(np.float32)[:, None, :]).astype(np.float32)
    m_rows, n_cols, nb = isum.shape
    y = np.zeros((m_rows, n_cols), dtype=np.float32)
    for m in range(m_rows):
        for n in range(n_cols):
            p = [np.float32(0.0)] * 8
            for b in range(nb):
                p[b % 8] = fma_f32(t[m, n, b], float(isum[m, n, b]), p[b % 8])
            y[m, n] = _tree8(p)
    return y


def linear_float_numpy(w: np.ndarray, x: np.ndarray) -> np.ndarray:
    """The float linear contract: w f32 [N, K] (already dequantized), x f32 [M, K] -> y f32 [M, N]."""
    m_rows, k = x.shape
    n_cols = w.shape[0]
    y = np.zeros((m_rows, n_cols), dtype=np.float32)
    for m in range(m_rows):
        for n in range(n_cols):
            p = [np.float32(0.0)] * 16
            for i in range(k):
                p[i % 16] = fma_f32(w[n, i], x[m, i], p[i % 16])
            s8 = [np.float32(p[j] + p[j + 8]) for j in range(8)]
            y[m, n] = _tree8(s8)
    return y
