/* linear/q32_cols_ggml_body.h — the family body of llama.cpp's repacked 32-element order (the second order
 * of linear.q4_0.q8_0.ggml.v1), written once against the lanes interface (common/km_lanes.h).
 *
 * On x86 llama.cpp repacks a q4_0 weight whose row count N is a multiple of 8 into 8-row interleaved
 * blocks and multiplies it with ggml_gemv_q4_0_8x8_q8_0 (ggml_gemm_q4_0_8x8_q8_0 for groups of 4
 * activation rows, the same arithmetic per output). Numerics (exactly the N % 8 == 0 branch of
 * linear/q4_0_q8_0_ggml_ref.c): per output (m, n) one f32 chain acc = +0; for the blocks b in order,
 * isum = the exact int32 sum of the block's 32 products (weight integer nibble - 8 times the activation
 * quant), t = f32(fp16(w.d) * fp16(x.d)), acc = fma((float)isum, t, acc); y = acc. There is no cross-lane
 * float operation, so the body vectorizes across 8 columns (lane c = column c's chain); which 8 columns
 * share a vector cannot change a bit.
 *
 * Schedule: the macros of linear/q32_ggml_body.h (KQ32_TT activation rows per prefill tile, KQ32_KS blocks
 * per K slice, KQ32_NC columns per chunk) plus KQ32_PF, the software prefetch distance in bytes (to L2)
 * along each of the 8 rows, or (optional) KQ32_PFG: decode over whole rows prefetches the 8-row group KQ32_PFG
 * groups ahead as one forward range instead (on Zen 3 the 8 interleaved row streams read 262144x640 from memory
 * at ~14 GB/s on 2 threads, the one-range prefetch at 23-25 GB/s). Partition: output columns n (km_part over N).
 * The instantiating file defines the entry point as a call of kq32_linear_q4_0, which takes this order
 * when N % 8 == 0 and llama.cpp's vec_dot order (linear/q32_ggml_body.h) otherwise.
 */
#ifndef KM_Q32_COLS_GGML_BODY_H
#define KM_Q32_COLS_GGML_BODY_H

#include "km_lanes.h"
#include "q32_ggml_body.h"

/* Columns [0, n) (n <= 8; missing columns repeat the last and are not written) at w, T activation rows,
 * blocks [0, ks) of the slice. park: 8 floats per row between slices. */
KL_INLINE void kqc_group(float *y, int64_t ystride, const uint8_t *w, int64_t wrow, int64_t wblk, int n, const int fmt,
                         const kq32_xrow *xr, int64_t ks, int first, int last, float *park, const int T) {
    const uint8_t *rows[8];
    for (int c = 0; c < 8; c++) rows[c] = w + (c < n ? c : n - 1) * wrow;
    kl_f8 acc[KQ32_TT];
    for (int t = 0; t < T; t++) acc[t] = first ? kl_f8_zero() : kl_f8_loadu(park + 8 * t);
#ifdef KQ32_PFG /* decode over whole rows: the 8 rows are one contiguous range, prefetched as one stream */
    const int lin = T == 1 && ks * wblk == wrow;
    const uint8_t *pfb = w + KQ32_PFG * 8 * wrow; /* the group KQ32_PFG groups ahead */
#else
    const int lin = 0;
    const uint8_t *pfb = w;
#endif
    const int64_t lpb = (8 * wrow / 64 + ks - 1) / ks; /* its lines per block */
    for (int64_t b = 0; b < ks; b++) {
        if (lin) {
            for (int64_t i = 0; i < lpb; i++) kl_prefetch_l2(pfb + (b * lpb + i) * 64);
        } else if ((b & 3) == 0)
            for (int c = 0; c < n; c++) kl_prefetch_l2(rows[c] + b * wblk + KQ32_PF);
        const kl_f8 dw = kl_f8_f16s(w + b * wblk, wrow, n);
        for (int t = 0; t < T; t++)
            acc[t] = kl_f8_fma(kl_q32_dot8(rows, b * wblk, &xr[t].xb[b], fmt), kl_f8_mul(dw, kl_f8_set1(xr[t].dx[b])),
                               acc[t]);
    }
    for (int t = 0; t < T; t++) {
        kl_f8_storeu(park + 8 * t, acc[t]);
        if (last)
            for (int c = 0; c < n; c++) y[t * ystride + c] = park[8 * t + c];
    }
}

#if defined(KL_Q32C)
/* Decode (T = 1) on KL_FV_LANES (16) columns per step (lanes headers with kl_q32c_dot16): the same chains,
 * 16 at a time. Columns [0, n) (n <= 16; missing columns repeat the last and are not written); park: 16
 * floats between slices. */
KL_INLINE void kqc_group16(float *y, const uint8_t *w, int64_t wrow, int64_t wblk, int n, const int fmt,
                           const kq32_xrow *xr, int64_t ks, int first, int last, float *park) {
    kl_fv acc = first ? kl_fv_zero() : kl_fv_loadu(park);
    for (int64_t b = 0; b < ks; b++) {
        if ((b & 3) == 0)
            for (int c = 0; c < n; c++) kl_prefetch_l2(w + c * wrow + b * wblk + KQ32_PF);
        const kl_fv t = kl_fv_mul(kl_fv_f16s(w + b * wblk, wrow, n), kl_fv_set1(xr->dx[b]));
        acc = kl_fv_fma(kl_q32c_dot16(w + b * wblk, wrow, n, &xr->xb[b], fmt), t, acc);
    }
    if (last) kl_fv_storen(y, acc, n);
    else kl_fv_storeu(park, acc);
}
#endif

KL_INLINE void kqc_cols(float *y, int64_t N, const uint8_t *w, int64_t wrow, int64_t wblk, const int fmt,
                        const kq32_xrow *xr, int64_t ks, int first, int last, float *park, int64_t c0, int64_t c1,
                        const int T) {
#if defined(KL_Q32C)
    if (T == 1) {
        for (int64_t g = c0; g < c1; g += 16) {
            const int n = c1 - g >= 16 ? 16 : (int)(c1 - g);
            kqc_group16(y + g, w + g * wrow, wrow, wblk, n, fmt, xr, ks, first, last, park + (g - c0));
        }
        return;
    }
#endif
    /* A full group's column count is a compile-time 8: with a run-time n the scale gather (kl_f8_f16s) stays a
     * loop assembling its vector in memory, a store-forwarding stall per block (q4_0 decode ran at ~30% of
     * the read bandwidth on AVX2 with it). */
    int64_t g = c0;
    for (; g + 8 <= c1; g += 8)
        kqc_group(y + g, N, w + g * wrow, wrow, wblk, 8, fmt, xr, ks, first, last, park + (g - c0) * T, T);
    if (g < c1)
        kqc_group(y + g, N, w + g * wrow, wrow, wblk, (int)(c1 - g), fmt, xr, ks, first, last, park + (g - c0) * T, T);
}

/* The repacked order over a whole linear.token_major.v1 call: thread ith's columns in chunks of
 * KQ32_NC, activation rows in tiles of KQ32_TT (then 8, 4, 2, 1), K in slices of KQ32_KS blocks. */
static inline void kqc_linear(float *y, const void *w, const void *x, int64_t M, int64_t N, int64_t K, int ith, int nth,
                              const int fmt) {
    const int64_t nb = K / KM_QK8_0;
    const int64_t wblk = KL_Q32_WBLK(fmt), xblk = KL_Q32_XBLK(fmt);
    int64_t lo, hi;
    km_part(N, ith, nth, &lo, &hi);
    const int64_t wrow = nb * wblk;
    const uint8_t *wb = (const uint8_t *)w;
    const uint8_t *xb = (const uint8_t *)x;
#ifdef KQ32G_NG
    if (M >= KQ32G_MIN_M) { /* the prefill GEMM of linear/q32_gemm_body.h, this order */
        kq32g_linear(y, wb, xb, M, N, nb, lo, hi, fmt, 1, 0);
        return;
    }
#endif
    kq32_xrow xr[KQ32_TT];
    float park[KQ32_NC * KQ32_TT] __attribute__((aligned(64)));
    for (int64_t c0 = lo; c0 < hi; c0 += KQ32_NC) {
        const int64_t c1 = hi - c0 > KQ32_NC ? c0 + KQ32_NC : hi;
        for (int64_t m0 = 0; m0 < M;) {
            const int64_t left = M - m0;
            const int T = left >= KQ32_TT ? KQ32_TT : left >= 8 ? 8 : left >= 4 ? 4 : left >= 2 ? 2 : 1;
            for (int64_t k0 = 0; k0 < nb; k0 += KQ32_KS) {
                const int64_t ks = nb - k0 > KQ32_KS ? KQ32_KS : nb - k0;
                for (int t = 0; t < T; t++) kq32_prep(&xr[t], xb + ((m0 + t) * nb + k0) * xblk, ks, fmt);
                const int first = k0 == 0, last = k0 + ks == nb;
                float *ym = y + m0 * N;
                const uint8_t *wk = wb + k0 * wblk;
                switch (T) {
#if KQ32_TT >= 16
                case 16: kqc_cols(ym, N, wk, wrow, wblk, fmt, xr, ks, first, last, park, c0, c1, 16); break;
#endif
#if KQ32_TT >= 8
                case 8: kqc_cols(ym, N, wk, wrow, wblk, fmt, xr, ks, first, last, park, c0, c1, 8); break;
#endif
                case 4: kqc_cols(ym, N, wk, wrow, wblk, fmt, xr, ks, first, last, park, c0, c1, 4); break;
                case 2: kqc_cols(ym, N, wk, wrow, wblk, fmt, xr, ks, first, last, park, c0, c1, 2); break;
                default: kqc_cols(ym, N, wk, wrow, wblk, fmt, xr, ks, first, last, park, c0, c1, 1); break;
                }
            }
            m0 += T;
        }
    }
}

/* linear.q4_0.q8_0.ggml.v1: the repacked order when N % 8 == 0 (llama.cpp repacks such a weight), else
 * llama.cpp's vec_dot_q4_0_q8_0 order. */
static inline void kq32_linear_q4_0(float *y, const void *w, const void *x, int64_t M, int64_t N, int64_t K, int ith,
                                    int nth) {
    if (N % 8 == 0) kqc_linear(y, w, x, M, N, K, ith, nth, KL_Q32_Q4_0);
    else kq32_linear(y, w, x, M, N, K, ith, nth, KL_Q32_Q4_0);
}

#endif /* KM_Q32_COLS_GGML_BODY_H */
