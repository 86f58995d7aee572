/* linear/q32_vnni.h — the shared AVX-512 VNNI body of the 32-block linear kernels (q8_0, q5_0 weights).
 *
 * Numerics exactly as km_simd.h states for linear.q{8,5}_0.q8_0.f32.v1: exact int32 per 32-block,
 * t_b = fp16(w.d) * fp16(x.d), partial b mod 8 updated with one FMA in increasing b, fixed final tree.
 * Layout trick (integer-only, so exact): a block's 32 products are split into its bytes 0..15 and
 * 16..31; four blocks' low halves share one zmm and their high halves another, so two chained
 * vpdpbusd leave 4 int32 lanes per block and the per-block reduction is two permute levels. The
 * activation rows of a tile are re-laid once into a stack buffer; K beyond KM_Q32V_MAXNB blocks
 * falls back to km_avx512_q32_linear. Does not handle other block formats.
 */
#ifndef KM_Q32_VNNI_H
#define KM_Q32_VNNI_H

#include "km_common.h"
#include "km_simd.h"

#define KM_Q32V_MAXNB 256 /* blocks per row handled by the re-laid path (K <= 8192) */
#define KM_Q32V_NC 256   /* prefill: weight rows per chunk, so a chunk stays in L2 across row tiles */

/* One activation row re-laid: per group of 4 blocks, 64 bytes of low halves then 64 of high halves;
 * per block, off * sum(x) and fp16(x.d) as f32; blocks nb..pad are zero. */
typedef struct {
    __m512i q[KM_Q32V_MAXNB / 2];
    int32_t xs[KM_Q32V_MAXNB];
    float dx[KM_Q32V_MAXNB];
} km_q32v_xrow;

KM_ALWAYS_INLINE void km_q32v_prep(km_q32v_xrow *r, const km_block_q8_0 *x, int64_t nb, const int off) {
    const int64_t pad = (nb + 7) & ~(int64_t)7;
    uint8_t *q = (uint8_t *)r->q;
    for (int64_t b = 0; b < pad; b++) {
        uint8_t *lo = q + (b >> 2) * 128 + (b & 3) * 16;
        if (b < nb) {
            __m256i v = _mm256_loadu_si256((const __m256i *)x[b].qs);
            _mm_storeu_si128((__m128i *)lo, _mm256_castsi256_si128(v));
            _mm_storeu_si128((__m128i *)(lo + 64), _mm256_extracti128_si256(v, 1));
            int32_t s = 0;
            for (int i = 0; i < KM_QK8_0; i++) s += x[b].qs[i];
            r->xs[b] = off * s;
            r->dx[b] = km_fp16_to_fp32(x[b].d);
        } else {
            _mm_storeu_si128((__m128i *)lo, _mm_setzero_si128());
            _mm_storeu_si128((__m128i *)(lo + 64), _mm_setzero_si128());
            r->xs[b] = 0;
            r->dx[b] = 0.0f;
        }
    }
}

/* Four weight blocks (first n valid, rest zero) as unsigned operands: lo = bytes 0..15, hi = 16..31. */
typedef struct {
    __m512i lo, hi;
} km_q32v_w4;

KM_ALWAYS_INLINE km_q32v_w4 km_q32v_load4(const uint8_t *blk, const int64_t wblk, const int fmt, const int n) {
    km_q32v_w4 r;
    if (fmt == 8) {
        __m512i lo = _mm512_setzero_si512(), hi = _mm512_setzero_si512();
        if (n > 0) {
            lo = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)(blk + 2)));
            hi = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)(blk + 18)));
        }
        if (n > 1) {
            lo = _mm512_inserti32x4(lo, _mm_loadu_si128((const __m128i *)(blk + wblk + 2)), 1);
            hi = _mm512_inserti32x4(hi, _mm_loadu_si128((const __m128i *)(blk + wblk + 18)), 1);
        }
        if (n > 2) {
            lo = _mm512_inserti32x4(lo, _mm_loadu_si128((const __m128i *)(blk + 2 * wblk + 2)), 2);
            hi = _mm512_inserti32x4(hi, _mm_loadu_si128((const __m128i *)(blk + 2 * wblk + 18)), 2);
        }
        if (n > 3) {
            lo = _mm512_inserti32x4(lo, _mm_loadu_si128((const __m128i *)(blk + 3 * wblk + 2)), 3);
            hi = _mm512_inserti32x4(hi, _mm_loadu_si128((const __m128i *)(blk + 3 * wblk + 18)), 3);
        }
        const __m512i f = _mm512_set1_epi8((char)0x80);
        r.lo = _mm512_xor_si512(lo, f);
        r.hi = _mm512_xor_si512(hi, f);
    } else {
        __m512i q = _mm512_setzero_si512();
        uint64_t mlo = 0, mhi = 0;
        for (int i = 0; i < 4; i++) {
            if (i >= n) break;
            uint32_t h;
            memcpy(&h, blk + i * wblk + 2, 4);
            mlo |= (uint64_t)(h & 0xFFFFu) << (16 * i);
            mhi |= (uint64_t)(h >> 16) << (16 * i);
        }
        if (n > 0) q = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)(blk + 6)));
        if (n > 1) q = _mm512_inserti32x4(q, _mm_loadu_si128((const __m128i *)(blk + wblk + 6)), 1);
        if (n > 2) q = _mm512_inserti32x4(q, _mm_loadu_si128((const __m128i *)(blk + 2 * wblk + 6)), 2);
        if (n > 3) q = _mm512_inserti32x4(q, _mm_loadu_si128((const __m128i *)(blk + 3 * wblk + 6)), 3);
        const __m512i m4 = _mm512_set1_epi8(0x0F), b4 = _mm512_set1_epi8(0x10);
        __m512i lo = _mm512_and_si512(q, m4);
        __m512i hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), m4);
        r.lo = _mm512_mask_add_epi8(lo, (__mmask64)mlo, lo, b4);
        r.hi = _mm512_mask_add_epi8(hi, (__mmask64)mhi, hi, b4);
    }
    return r;
}

/* Sum of a 4-block group against one re-laid activation group: 4 int32 lanes per block. */
KM_ALWAYS_INLINE __m512i km_q32v_dot4(km_q32v_w4 w, const __m512i *xg) {
    return _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), w.lo, xg[0]), w.hi, xg[1]);
}

/* a0, b0: blocks 0..3 and 4..7 of output pair member 0 (4 lanes per block); a1, b1: member 1.
 * Lane j of the result = block j's exact total for member 0 (j < 8), block j - 8's for member 1. */
KM_ALWAYS_INLINE __m512i km_q32v_sum16(__m512i a0, __m512i b0, __m512i a1, __m512i b1) {
    const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    const __m512i odd = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
    __m512i p0 = _mm512_add_epi32(_mm512_permutex2var_epi32(a0, even, b0), _mm512_permutex2var_epi32(a0, odd, b0));
    __m512i p1 = _mm512_add_epi32(_mm512_permutex2var_epi32(a1, even, b1), _mm512_permutex2var_epi32(a1, odd, b1));
    return _mm512_add_epi32(_mm512_permutex2var_epi32(p0, even, p1), _mm512_permutex2var_epi32(p0, odd, p1));
}

KM_ALWAYS_INLINE __m512 km_q32v_join(__m256 lo, __m256 hi) {
    return _mm512_insertf32x8(_mm512_castps256_ps512(lo), hi, 1);
}

KM_ALWAYS_INLINE __m512i km_q32v_joini(const int32_t *lo, const int32_t *hi) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)lo)),
                              _mm256_loadu_si256((const __m256i *)hi), 1);
}

/* The 8-block group at block b (n valid blocks, compile-time) of one weight row. */
KM_ALWAYS_INLINE void km_q32v_wgroup(km_q32v_w4 w[2], __m256 *dw, const uint8_t *wr, const int64_t wblk,
                                     const int fmt, const int n) {
    w[0] = km_q32v_load4(wr, wblk, fmt, n < 4 ? n : 4);
    if (n > 4) w[1] = km_q32v_load4(wr + 4 * wblk, wblk, fmt, n - 4);
    *dw = km_avx512_f16x8_blocks(wr, wblk, n);
}

KM_ALWAYS_INLINE __m512i km_q32v_pairsum(const km_q32v_w4 wa[2], const km_q32v_w4 wb[2], const __m512i *xa,
                                         const __m512i *xb, const int n) {
    const __m512i z = _mm512_setzero_si512();
    __m512i a0 = km_q32v_dot4(wa[0], xa), a1 = km_q32v_dot4(wb[0], xb);
    __m512i b0 = n > 4 ? km_q32v_dot4(wa[1], xa + 2) : z, b1 = n > 4 ? km_q32v_dot4(wb[1], xb + 2) : z;
    return km_q32v_sum16(a0, b0, a1, b1);
}

/* One group of n <= 8 blocks at block b for an R x T tile. T even: pairs (r, t), (r, t + 1);
 * T == 1: pairs (r, 0), (r + 1, 0) (an odd last row is paired with itself). */
KM_ALWAYS_INLINE void km_q32v_group(__m512 *acc, const uint8_t *w, int64_t wrow, int64_t wblk, const int fmt,
                                    const km_q32v_xrow *xr, int64_t b, const int n, const int R, const int T) {
    const int64_t g = b >> 1; /* index of the first 4-block group's low half in xrow.q, in zmm units */
    if (T == 1) {
        const __m512i xsp = km_q32v_joini(xr->xs + b, xr->xs + b);
        const __m512 dxp = km_q32v_join(_mm256_loadu_ps(xr->dx + b), _mm256_loadu_ps(xr->dx + b));
        for (int r = 0; r < R; r += 2) {
            const int r1 = r + 1 < R ? r + 1 : r;
            km_q32v_w4 wa[2], wb[2];
            __m256 da, db;
            km_q32v_wgroup(wa, &da, w + r * wrow + b * wblk, wblk, fmt, n);
            km_q32v_wgroup(wb, &db, w + r1 * wrow + b * wblk, wblk, fmt, n);
            __m512i s = _mm512_sub_epi32(km_q32v_pairsum(wa, wb, xr->q + g, xr->q + g, n), xsp);
            __m512 t = _mm512_mul_ps(km_q32v_join(da, db), dxp);
            acc[r >> 1] = _mm512_fmadd_ps(t, _mm512_cvtepi32_ps(s), acc[r >> 1]);
        }
    } else {
        __m512i xsp[4];
        __m512 dxp[4];
        for (int tp = 0; tp < T / 2; tp++) {
            const km_q32v_xrow *x0 = xr + 2 * tp, *x1 = x0 + 1;
            xsp[tp] = km_q32v_joini(x0->xs + b, x1->xs + b);
            dxp[tp] = km_q32v_join(_mm256_loadu_ps(x0->dx + b), _mm256_loadu_ps(x1->dx + b));
        }
        for (int r = 0; r < R; r++) {
            km_q32v_w4 wa[2];
            __m256 da;
            km_q32v_wgroup(wa, &da, w + r * wrow + b * wblk, wblk, fmt, n);
            const __m512 dwp = km_q32v_join(da, da);
            for (int tp = 0; tp < T / 2; tp++) {
                const km_q32v_xrow *x0 = xr + 2 * tp, *x1 = x0 + 1;
                __m512i s = _mm512_sub_epi32(km_q32v_pairsum(wa, wa, x0->q + g, x1->q + g, n), xsp[tp]);
                __m512 t = _mm512_mul_ps(dwp, dxp[tp]);
                acc[r * (T / 2) + tp] = _mm512_fmadd_ps(t, _mm512_cvtepi32_ps(s), acc[r * (T / 2) + tp]);
            }
        }
    }
}

/* Decode form for whole 32-byte weight blocks (q8_0): one group of n <= 8 blocks at block b for R
 * weight rows and one activation row x; ymm vpdpbusd per block, the AVX2 8-vector reduction. */
KM_ALWAYS_INLINE void km_q32v_dgroup(__m256 acc[4], const uint8_t *w, int64_t wrow, int64_t wblk,
                                     const km_block_q8_0 *x, const km_q32v_xrow *xr, int64_t b, const int n,
                                     const int R) {
    const __m256 dx = _mm256_loadu_ps(xr->dx + b);
    const __m256i xs = _mm256_loadu_si256((const __m256i *)(xr->xs + b));
    const __m256i f = _mm256_set1_epi8((char)0x80);
    for (int r = 0; r < R; r++) {
        const uint8_t *wr = w + r * wrow + b * wblk;
        __m256i v[8];
        for (int j = 0; j < 8; j++) {
            v[j] = j < n ? _mm256_dpbusd_epi32(_mm256_setzero_si256(),
                                               _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(wr + j * wblk + 2)), f),
                                               _mm256_loadu_si256((const __m256i *)x[b + j].qs))
                         : _mm256_setzero_si256();
        }
        __m256i isum = _mm256_sub_epi32(km_avx2_reduce8_i32(v), xs);
        __m256 dw = n == 8 ? km_avx2_f16x8_strided(wr, wblk) : km_avx2_f16x8_strided_n(wr, wblk, n);
        acc[r] = _mm256_fmadd_ps(_mm256_mul_ps(dw, dx), _mm256_cvtepi32_ps(isum), acc[r]);
    }
}

KM_ALWAYS_INLINE void km_q32v_drows(float *y, const uint8_t *w, int64_t wrow, int64_t wblk, const km_block_q8_0 *x,
                                    const km_q32v_xrow *xr, int64_t nb, const int R) {
    __m256 acc[4];
    for (int r = 0; r < R; r++) acc[r] = _mm256_setzero_ps();
    int64_t b = 0;
    for (; b + 8 <= nb; b += 8) km_q32v_dgroup(acc, w, wrow, wblk, x, xr, b, 8, R);
    switch (nb - b) { /* the tail, with its block count a compile-time constant */
    case 0: break;
    case 1: km_q32v_dgroup(acc, w, wrow, wblk, x, xr, b, 1, R); break;
    case 2: km_q32v_dgroup(acc, w, wrow, wblk, x, xr, b, 2, R); break;
    case 3: km_q32v_dgroup(acc, w, wrow, wblk, x, xr, b, 3, R); break;
    case 4: km_q32v_dgroup(acc, w, wrow, wblk, x, xr, b, 4, R); break;
    case 5: km_q32v_dgroup(acc, w, wrow, wblk, x, xr, b, 5, R); break;
    case 6: km_q32v_dgroup(acc, w, wrow, wblk, x, xr, b, 6, R); break;
    default: km_q32v_dgroup(acc, w, wrow, wblk, x, xr, b, 7, R); break;
    }
    for (int r = 0; r < R; r++) y[r] = km_avx2_tree8(acc[r]);
}

/* R x T outputs y[t * ystride + r] over the whole K (nb blocks). */
KM_ALWAYS_INLINE void km_q32v_tile(float *y, int64_t ystride, const uint8_t *w, int64_t wrow, int64_t wblk,
                                   const int fmt, const km_q32v_xrow *xr, int64_t nb, const int R, const int T) {
    enum { NA = 8 };
    const int na = T == 1 ? (R + 1) / 2 : R * (T / 2);
    __m512 acc[NA];
    for (int i = 0; i < na; i++) acc[i] = _mm512_setzero_ps();
    int64_t b = 0;
    for (; b + 8 <= nb; b += 8) km_q32v_group(acc, w, wrow, wblk, fmt, xr, b, 8, R, T);
    switch (nb - b) { /* the tail, with its block count a compile-time constant */
    case 0: break;
    case 1: km_q32v_group(acc, w, wrow, wblk, fmt, xr, b, 1, R, T); break;
    case 2: km_q32v_group(acc, w, wrow, wblk, fmt, xr, b, 2, R, T); break;
    case 3: km_q32v_group(acc, w, wrow, wblk, fmt, xr, b, 3, R, T); break;
    case 4: km_q32v_group(acc, w, wrow, wblk, fmt, xr, b, 4, R, T); break;
    case 5: km_q32v_group(acc, w, wrow, wblk, fmt, xr, b, 5, R, T); break;
    case 6: km_q32v_group(acc, w, wrow, wblk, fmt, xr, b, 6, R, T); break;
    default: km_q32v_group(acc, w, wrow, wblk, fmt, xr, b, 7, R, T); break;
    }
    if (T == 1) {
        for (int r = 0; r < R; r++) {
            __m512 a = acc[r >> 1];
            __m256 h = (r & 1) ? _mm512_extractf32x8_ps(a, 1) : _mm512_castps512_ps256(a);
            y[r] = km_avx2_tree8(h);
        }
    } else {
        for (int r = 0; r < R; r++)
            for (int tp = 0; tp < T / 2; tp++) {
                __m512 a = acc[r * (T / 2) + tp];
                y[(2 * tp) * ystride + r] = km_avx2_tree8(_mm512_castps512_ps256(a));
                y[(2 * tp + 1) * ystride + r] = km_avx2_tree8(_mm512_extractf32x8_ps(a, 1));
            }
    }
}

/* Columns [lo, hi) of all M activation rows: rows 4 at a time (then 2, then 1), each row tile
 * against the columns, 4 (then 1) at a time; decode of q8_0 uses km_q32v_drows on 2 columns. */
KM_ALWAYS_INLINE void km_q32v_cols(float *y, const uint8_t *wb, const km_block_q8_0 *xb, int64_t M, int64_t N,
                                   int64_t nb, int64_t wrow, const int64_t wblk, const int fmt, const int off,
                                   int64_t lo, int64_t hi, km_q32v_xrow xr[4]) {
    int64_t m = 0;
    for (; m + 4 <= M; m += 4) {
        for (int t = 0; t < 4; t++) km_q32v_prep(&xr[t], xb + (m + t) * nb, nb, off);
        int64_t n = lo;
        for (; n + 4 <= hi; n += 4) km_q32v_tile(&y[m * N + n], N, wb + n * wrow, wrow, wblk, fmt, xr, nb, 4, 4);
        for (; n < hi; n++) km_q32v_tile(&y[m * N + n], N, wb + n * wrow, wrow, wblk, fmt, xr, nb, 1, 4);
    }
    for (; m + 2 <= M; m += 2) {
        for (int t = 0; t < 2; t++) km_q32v_prep(&xr[t], xb + (m + t) * nb, nb, off);
        int64_t n = lo;
        for (; n + 4 <= hi; n += 4) km_q32v_tile(&y[m * N + n], N, wb + n * wrow, wrow, wblk, fmt, xr, nb, 4, 2);
        for (; n < hi; n++) km_q32v_tile(&y[m * N + n], N, wb + n * wrow, wrow, wblk, fmt, xr, nb, 1, 2);
    }
    for (; m < M; m++) {
        km_q32v_prep(&xr[0], xb + m * nb, nb, off);
        int64_t n = lo;
        if (fmt == 8) {
            for (; n + 2 <= hi; n += 2) km_q32v_drows(&y[m * N + n], wb + n * wrow, wrow, wblk, xb + m * nb, xr, nb, 2);
            for (; n < hi; n++) km_q32v_drows(&y[m * N + n], wb + n * wrow, wrow, wblk, xb + m * nb, xr, nb, 1);
            continue;
        }
        for (; n + 4 <= hi; n += 4) km_q32v_tile(&y[m * N + n], N, wb + n * wrow, wrow, wblk, fmt, xr, nb, 4, 1);
        for (; n < hi; n++) km_q32v_tile(&y[m * N + n], N, wb + n * wrow, wrow, wblk, fmt, xr, nb, 1, 1);
    }
}

/* The whole linear.token_major.v1 call: columns [lo, hi) of this thread (km_part over N), in
 * chunks of KM_Q32V_NC columns when M >= 4. fmt 8 = q8_0 (off 128), 5 = q5_0 (off 16); load is the
 * loader of the km_avx512_q32_linear fallback (K > 8192, and q8_0 decode with K > 1024). */
KM_ALWAYS_INLINE void km_q32v_linear(float *y, const void *w, const void *x, int64_t M, int64_t N, int64_t K,
                                     int ith, int nth, const int64_t wblk, const int fmt, km_avx2_wload load,
                                     const int off) {
    const int64_t nb = K / KM_QK8_0;
    if (nb > KM_Q32V_MAXNB || (fmt == 8 && M == 1 && nb > 32)) { /* measured: the old path streams long rows faster */
        km_avx512_q32_linear(y, w, x, M, N, K, ith, nth, wblk, load, off);
        return;
    }
    int64_t lo, hi;
    km_part(N, ith, nth, &lo, &hi);
    const int64_t wrow = nb * wblk;
    const uint8_t *wb = (const uint8_t *)w;
    const km_block_q8_0 *xb = (const km_block_q8_0 *)x;
    km_q32v_xrow xr[4];
    const int64_t chunk = M >= 4 ? KM_Q32V_NC : hi - lo;
    for (int64_t c0 = lo; c0 < hi; c0 += chunk) {
        const int64_t c1 = hi - c0 > chunk ? c0 + chunk : hi;
        km_q32v_cols(y, wb, xb, M, N, nb, wrow, wblk, fmt, off, c0, c1, xr);
    }
}

#endif /* KM_Q32_VNNI_H */
