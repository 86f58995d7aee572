"""NumPy emulation of llama.cpp's CPU flash-attention (one query row at a time, f16 K/V cache) for parity work.

Input: query rows f32 [M, Hq*D], head-major caches [Hkv, C, D] holding f16 values -> y f32 [M, Hq*D],
with the arithmetic of ggml-cpu's flash_attn_ext one-row path on an AVX512 build (f16 query, 4x16-lane
f16 dot with FMA and a fixed reduce tree, libm expf, online softmax with an f16 accumulator rounded at
every step). It is an oracle for the ggml_fa kernels and for check_peer.py; it is slow and not a kernel.
"""

from __future__ import annotations

import ctypes
import ctypes.util

import numpy as np

__all__ = ["expf", "fma_f32", "dot_f16", "attend_row", "attend_row_split", "llama_n_kv", "split_chunks", "attention"]

_LIBM = ctypes.CDLL(ctypes.util.find_library("m") or "libm.so.6")
_LIBM.expf.restype = ctypes.c_float
_LIBM.expf.argtypes = [ctypes.c_float]

_F32 = np.float32
_F16 = np.float16


def expf(x: float) -> np.float32:
    """The C library's expf of a float32 value (what ggml's scalar softmax step calls)."""
    return _F32(_LIBM.expf(float(_F32(x))))


def fma_f32(a: np.ndarray, b: np.ndarray | float, c: np.ndarray | float) -> np.ndarray:
    """Correctly rounded float32 fma(a, b, c) for float32 inputs whose product is exact in float64.

    a*b is exact in float64 when the operands' significands total <= 53 bits (f16 x f32 and f32 x f32
    with one f16 operand do). The sum is done in float64 with its exact error (TwoSum); the float32
    rounding is corrected when the float64 sum lands exactly on a float32 rounding midpoint.
    """
    a64 = np.asarray(a, np.float32).astype(np.float64)
    p = a64 * np.float64(_F32(b)) if np.ndim(b) == 0 else a64 * np.asarray(b, np.float32).astype(np.float64)
    c64 = np.asarray(c, np.float32).astype(np.float64)
    s = p + c64
    bb = s - p
    err = (p - (s - bb)) + (c64 - bb)
    r = s.astype(np.float32)
    r64 = r.astype(np.float64)
    other = np.where(s > r64, np.nextafter(r, _F32(np.inf)), np.nextafter(r, _F32(-np.inf)))
    mid = (r64 + other.astype(np.float64)) / 2.0
    tie = (s == mid) & (err != 0) & (s != r64)
    if np.any(tie):
        up = err > 0
        lo = np.minimum(r, other)
        hi = np.maximum(r, other)
        r = np.where(tie, np.where(up, hi, lo), r)
    return r.astype(np.float32)


def dot_f16(k16: np.ndarray, q16: np.ndarray, width: int = 64) -> np.ndarray:
    """ggml_vec_dot_f16 (AVX512 build; width=32: the AVX2 build) of each row of k16 [N, D] with q16 [D] (f16 values).

    Main part (D rounded down to 64): accumulator a (0..3), lane l (0..15) sums elements 64t + 16a + l
    over t in order with FMA (f16 x f16 products are exact in f32, so each step is one f32 add). Then
    acc0 += acc2, acc1 += acc3, acc0 += acc1; lanes l += l+8, l += l+4, l += l+2, then lane0 + lane1.
    Tail elements (D mod 64) are added one by one in double to that float, the result rounded to float.
    The AVX2 build (width 32) has lanes of 8: accumulator a, lane l sums elements 32t + 8a + l; acc0 += acc2,
    acc1 += acc3, acc0 += acc1; then l += l+4 (the 128-bit halves) and (l0 + l1) + (l2 + l3); tail D mod 32.
    """
    k = np.asarray(k16, np.float32)
    q = np.asarray(q16, np.float32)
    n, d = k.shape
    if width == 32:
        npart = d - d % 32
        acc = np.zeros((n, 4, 8), np.float32)
        for t in range(0, npart, 32):
            acc = (acc + (k[:, t:t + 32] * q[t:t + 32]).reshape(n, 4, 8)).astype(np.float32)
        v = ((acc[:, 0] + acc[:, 2]).astype(np.float32) + (acc[:, 1] + acc[:, 3]).astype(np.float32)).astype(np.float32)
        t4 = (v[:, :4] + v[:, 4:]).astype(np.float32)
        res = ((t4[:, 0] + t4[:, 1]).astype(np.float32) + (t4[:, 2] + t4[:, 3]).astype(np.float32))
        res = res.astype(np.float32).astype(np.float64)
        for i in range(npart, d):
            res = res + (k[:, i] * q[i]).astype(np.float32).astype(np.float64)
        return res.astype(np.float32)
    assert width == 64, width
    npart = d - d % 64
    acc = np.zeros((n, 4, 16), np.float32)
    for t in range(0, npart, 64):
        prod = (k[:, t:t + 64] * q[t:t + 64]).reshape(n, 4, 16)
        acc = (acc + prod).astype(np.float32)
    a = (acc[:, 0] + acc[:, 2]).astype(np.float32)
    b = (acc[:, 1] + acc[:, 3]).astype(np.float32)
    v = (a + b).astype(np.float32)
    v = (v[:, :8] + v[:, 8:]).astype(np.float32)
    v = (v[:, :4] + v[:, 4:]).astype(np.float32)
    v = (v[:, :2] + v[:, 2:]).astype(np.float32)
    res = (v[:, 0] + v[:, 1]).astype(np.float32).astype(np.float64)
    for i in range(npart, d):
        res = res + (k[:, i] * q[i]).astype(np.float32).astype(np.float64)
    return res.astype(np.float32)


def _online(q16: np.ndarray, k16: np.ndarray, v16: np.ndarray, keys: np.ndarray,
            s_fma: bool = True, dot_width: int = 64) -> tuple[np.float32, np.float32, np.ndarray]:
    """The online softmax over `keys` in order: (M, S, f32(VKQ16)), not normalized (M = -inf, S = 0 for no keys)."""
    d = q16.shape[0]
    vkq = np.zeros(d, np.float32)
    big_s = _F32(0.0)
    big_m = _F32(-np.inf)
    if keys.size == 0:
        return big_m, big_s, vkq
    kk = np.asarray(k16[keys], np.float32)
    vv = np.asarray(v16[keys], np.float32)
    s_all = dot_f16(kk, q16, dot_width)
    for j in range(keys.size):
        s = s_all[j]
        ms = _F32(1.0)
        vs = _F32(1.0)
        if s > big_m:
            m_old = big_m
            big_m = s
            ms = expf(m_old - big_m)
            vkq = (vkq * ms).astype(np.float32).astype(_F16).astype(np.float32)
        else:
            vs = expf(s - big_m)
        vkq = fma_f32(vv[j], vs, vkq).astype(_F16).astype(np.float32)
        if s_fma:
            big_s = fma_f32(np.array([big_s]), ms, np.array([vs]))[0]
        else:
            big_s = _F32(_F32(big_s * ms) + vs)
    return big_m, big_s, vkq


def _q16(q: np.ndarray, scale: float) -> np.ndarray:
    return (np.asarray(q, np.float32) * _F32(scale)).astype(np.float32).astype(_F16).astype(np.float32)


def attend_row(q: np.ndarray, k16: np.ndarray, v16: np.ndarray, keys: np.ndarray, scale: float,
               s_fma: bool = True, dot_width: int = 64) -> np.ndarray:
    """One query row of one head: q f32 [D], caches [C, D] (f16 values), visible key indices in order.

    Q16 = f16(f32(q * scale)) (llama.cpp scales Q with ggml_scale before the attention and passes
    kq_scale 1); s_j = dot_f16(K_j, Q16); online softmax over keys in the given order: on a new maximum
    VKQ16 = f16(VKQ16 * expf(Mold - M)) and vs = 1, else vs = expf(s - M); VKQ16 = f16(fma(V_j, vs,
    VKQ16)); S = fma(S, ms, vs) (S*ms + vs rounded twice when not s_fma). y = f32(VKQ16) * (1/S).
    """
    if keys.size == 0:
        return np.zeros(q.shape[0], np.float32)
    _m, big_s, vkq = _online(_q16(q, scale), k16, v16, keys, s_fma, dot_width)
    inv = _F32(0.0) if big_s == 0 else _F32(_F32(1.0) / big_s)
    return (vkq * inv).astype(np.float32)


def llama_n_kv(p: int) -> int:
    """llama.cpp's KV view length when it decodes position p alone: the used cells (p + 1, in position
    order from cell 0) padded up to a multiple of 256, at least 256 (llama_kv_cache::get_n_kv)."""
    return max(256, -(-(p + 1) // 256) * 256)


def split_chunks(p: int, n_split: int) -> list[tuple[int, int]]:
    """The key ranges [lo, hi) ggml's one-row flash attention gives each of n_split threads at position p.

    Below a view of 512 cells there is no split (one range). From 512 on, thread t takes cells
    [t*cs, min((t+1)*cs, n_kv)) with cs = ceil(n_kv / n_split); ranges starting at or past n_kv are empty.
    """
    n_kv = llama_n_kv(p)
    if n_kv < 512:
        return [(0, n_kv)]
    cs = -(-n_kv // n_split)
    return [(t * cs, min((t + 1) * cs, n_kv)) for t in range(n_split) if t * cs < n_kv]


def attend_row_split(q: np.ndarray, k16: np.ndarray, v16: np.ndarray, keys: np.ndarray, scale: float,
                     p: int, n_split: int, dot_width: int = 64) -> np.ndarray:
    """attend_row as llama.cpp computes it with n_split threads: one online softmax per key range of
    split_chunks(p, n_split), then the partials merged in range order in f32:
    M' = fmaxf(M, Mc), so = expf(M - M'), sn = expf(Mc - M'), V = fma(V, so, f32(Vc * sn)),
    S = fma(S, so, f32(Sc * sn)) (ranges without a visible key, Sc == 0, skipped); y = V * (1/S) if S != 0.
    dot_width 32: every score dot as llama.cpp's AVX2 build computes it (dot_f16)."""
    chunks = split_chunks(p, n_split)
    if llama_n_kv(p) < 512:
        return attend_row(q, k16, v16, keys, scale, dot_width=dot_width)
    q16 = _q16(q, scale)
    big_m, big_s = _F32(-np.inf), _F32(0.0)
    acc = np.zeros(q.shape[0], np.float32)
    for lo, hi in chunks:
        mc, sc, vc = _online(q16, k16, v16, keys[(keys >= lo) & (keys < hi)], dot_width=dot_width)
        if sc == 0:
            continue
        m_new = _F32(np.fmax(big_m, mc))
        so, sn = expf(big_m - m_new), expf(mc - m_new)
        acc = fma_f32(acc, so, (vc * sn).astype(np.float32))
        big_s = fma_f32(np.array([big_s]), so, np.array([_F32(sc * sn)]))[0]
        big_m = m_new
    if big_s != 0:
        acc = (acc * _F32(_F32(1.0) / big_s)).astype(np.float32)
    return acc


def attention(q: np.ndarray, k_cache: np.ndarray, v_cache: np.ndarray, n_q_heads: int, pos0: int,
              scale: float, window: int = 0, s_fma: bool = True, n_split: int | None = None,
              dot_width: int = 64) -> np.ndarray:
    """Causal GQA like ops.attention: q [M, Hq*D], caches [Hkv, C, D] -> y f32 [M, Hq*D].

    Row m is at position p = pos0 + m and sees keys j <= p (and p - j < window when window > 0),
    visited in ascending j; query head h reads KV head h // (Hq / Hkv). Cache values are rounded to f16.
    With n_split, each row is computed as llama.cpp decoding it alone on n_split threads (attend_row_split).
    dot_width 32: the score dot of llama.cpp's AVX2 build (dot_f16).
    """
    q = np.asarray(q, np.float32)
    m = q.shape[0]
    hkv, _, d = k_cache.shape
    group = n_q_heads // hkv
    k16 = np.asarray(k_cache, np.float32).astype(_F16).astype(np.float32)
    v16 = np.asarray(v_cache, np.float32).astype(_F16).astype(np.float32)
    y = np.zeros((m, n_q_heads, d), np.float32)
    qh = q.reshape(m, n_q_heads, d)
    for r in range(m):
        p = pos0 + r
        lo = max(0, p - window + 1) if window > 0 else 0
        keys = np.arange(lo, p + 1)
        for h in range(n_q_heads):
            if n_split is None:
                y[r, h] = attend_row(qh[r, h], k16[h // group], v16[h // group], keys, scale, s_fma, dot_width)
            else:
                y[r, h] = attend_row_split(qh[r, h], k16[h // group], v16[h // group], keys, scale, p, n_split,
                                           dot_width)
    return y.reshape(m, n_q_heads * d)
