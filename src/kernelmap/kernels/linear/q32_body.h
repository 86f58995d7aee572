/* linear/q32_body.h — the family body of linear.<w>.q8_0.f32.v1 (w = q4_0, q5_0, q8_0): kernelmap's own
 * order for the 32-element formats, written once against the lanes interface (common/km_lanes.h); every
 * ISA variant of these providers is an instantiation of it.
 *
 * Numerics (exactly linear/<w>_q8_0_ref.c): per output (m, n), eight f32 partials p[0..7] = +0; block b
 * contributes isum_b = the exact int32 sum of its 32 products (the weight's integer times the activation
 * quant) and t_b = f32(fp16(w.d) * fp16(x.d)); p[b mod 8] = fma(t_b, (float)isum_b, p[b mod 8]), b
 * increasing; y = ((p0 + p4) + (p2 + p6)) + ((p1 + p5) + (p3 + p7)) = kl_f8_fold(p).
 * Vectorized over blocks: a group of 8 blocks g .. g + 7 puts block g + c in lane c, so the partials are
 * the eight lanes of one kl_f8 and each lane gets its blocks' fmas in increasing b. The isums of a group
 * come from kl_q32_isum8x2 (exact int32, |isum| <= 32 * 128 * 127, converted exactly). A short last group
 * runs with its block count a compile-time constant: its missing lanes have t = +0 (kl_f8_f16s) and
 * isum = +0, and fma(+0, +0, p) = p since a partial is never -0.
 *
 * Schedule (the instantiating file defines these before including this header):
 *   Q32K_RP  weight row pairs per tile (2 * Q32K_RP output columns share each prepared activation block)
 *   Q32K_TT  activation rows per prefill tile (each unpacked weight block is reused Q32K_TT times); rows
 *            left over run one at a time
 *   Q32K_PF  prefetch distance in bytes ahead of each weight row's stream (to L2; 0: none)
 *   Q32K_KS  blocks per K slice (the prepared activation slice; partials are parked between slices)
 *   Q32K_NC  columns per chunk (even)
 * Partition: output columns n (km_part over N); no output depends on M, tiling or (ith, nth).
 * The instantiating file defines the entry point (linear.token_major.v1 ABI) as a call of q32k_linear.
 */
#ifndef KM_Q32_BODY_H
#define KM_Q32_BODY_H

#include "km_lanes.h"

#define Q32K_XBLK 34 /* bytes per q8_0 activation block: fp16 d, 32 int8 quants */

/* T activation rows' slice of ks blocks, prepared once for every column tile of a chunk: each block for the
 * dots and its f16 scale as f32 (+0 past the slice, so a short group's t lanes are +0, never NaN). */
typedef struct {
    kl_q32xb xb[Q32K_KS];
    float dx[Q32K_KS + 8];
} q32k_xrow;

KL_INLINE void q32k_prep(q32k_xrow *r, const uint8_t *x, int64_t ks, const int fmt) {
    for (int64_t b = 0; b < ks; b++) {
        const uint8_t *blk = x + b * Q32K_XBLK;
        km_half h;
        memcpy(&h, blk, 2);
        r->dx[b] = km_fp16_to_fp32(h);
        kl_q32xb_prep(&r->xb[b], (const int8_t *)(blk + 2), fmt);
    }
    for (int64_t b = ks; b < ks + 8; b++) r->dx[b] = 0.0f;
}

/* One group of n (compile-time, <= 8) blocks at block b of the slice for RP row pairs (ra[p], rb[p]) x T
 * activation rows: acc[p * T + t] lanes = the partials of (rows A, B of pair p, activation row t). */
KL_INLINE void q32k_group(kl_f8x2 *acc, const uint8_t *const *ra, const uint8_t *const *rb, const q32k_xrow *xr,
                          int64_t b, int64_t wblk, const int fmt, const int RP, const int T, const int n) {
#pragma GCC unroll 8
    for (int p = 0; p < RP; p++) {
        const uint8_t *a = ra[p] + b * wblk, *c = rb[p] + b * wblk;
        if (Q32K_PF) {
            for (int64_t o = 0; o < n * wblk; o += 64) {
                kl_prefetch_l2(a + Q32K_PF + o);
                kl_prefetch_l2(c + Q32K_PF + o);
            }
        }
        kl_q32w2 wp[8];
        for (int j = 0; j < n; j++) wp[j] = kl_q32w2_load(a + j * wblk, c + j * wblk, fmt);
        const kl_f8x2 dw = kl_f8x2_f16s(a, c, wblk, n);
#pragma GCC unroll 16
        for (int t = 0; t < T; t++) {
            const kl_f8x2 tb = kl_f8x2_mul_f8(dw, kl_f8_loadu(xr[t].dx + b));
            acc[p * T + t] = kl_f8x2_fma(tb, kl_q32_isum8x2(wp, &xr[t].xb[b], fmt, n), acc[p * T + t]);
        }
    }
}

/* Output columns 0 .. R - 1 of w (R <= 2 * RP; a missing B row repeats A and is not written) x T activation
 * rows over the slice's ks blocks; y rows N floats apart. first: partials from +0, else from park; last:
 * fold and store y, else park them (16 floats per accumulator). */
KL_INLINE void q32k_tile(float *y, int64_t N, const uint8_t *w, int64_t wrow, int64_t wblk, const q32k_xrow *xr,
                         int64_t ks, int first, int last, float *park, const int fmt, const int RP, const int T, int R) {
    kl_f8x2 acc[Q32K_RP * Q32K_TT];
    const uint8_t *ra[Q32K_RP], *rb[Q32K_RP];
    for (int p = 0; p < RP; p++) {
        const int ia = 2 * p < R ? 2 * p : R - 1;
        const int ib = 2 * p + 1 < R ? 2 * p + 1 : ia;
        ra[p] = w + ia * wrow;
        rb[p] = w + ib * wrow;
    }
    for (int i = 0; i < RP * T; i++) acc[i] = first ? kl_f8x2_zero() : kl_f8x2_loadu(park + 16 * i);
    int64_t b = 0;
    for (; b + 8 <= ks; b += 8) q32k_group(acc, ra, rb, xr, b, wblk, fmt, RP, T, 8);
    switch (ks - b) { /* the tail, with its block count a compile-time constant */
    case 0: break;
    case 1: q32k_group(acc, ra, rb, xr, b, wblk, fmt, RP, T, 1); break;
    case 2: q32k_group(acc, ra, rb, xr, b, wblk, fmt, RP, T, 2); break;
    case 3: q32k_group(acc, ra, rb, xr, b, wblk, fmt, RP, T, 3); break;
    case 4: q32k_group(acc, ra, rb, xr, b, wblk, fmt, RP, T, 4); break;
    case 5: q32k_group(acc, ra, rb, xr, b, wblk, fmt, RP, T, 5); break;
    case 6: q32k_group(acc, ra, rb, xr, b, wblk, fmt, RP, T, 6); break;
    default: q32k_group(acc, ra, rb, xr, b, wblk, fmt, RP, T, 7); break;
    }
    for (int p = 0; p < RP; p++) {
        for (int t = 0; t < T; t++) {
            if (!last) {
                kl_f8x2_storeu(park + 16 * (p * T + t), acc[p * T + t]);
                continue;
            }
            float fa, fb;
            kl_f8x2_fold(acc[p * T + t], &fa, &fb);
            if (2 * p < R) y[t * N + 2 * p] = fa;
            if (2 * p + 1 < R) y[t * N + 2 * p + 1] = fb;
        }
    }
}

/* Columns [c0, c1) x T activation rows over one slice: tiles of 2 * Q32K_RP columns, then pairs. */
KL_INLINE void q32k_cols(float *y, int64_t N, const uint8_t *w, int64_t wrow, int64_t wblk, const q32k_xrow *xr,
                         int64_t ks, int first, int last, float *park, int64_t c0, int64_t c1, const int fmt,
                         const int T) {
    int64_t n = c0;
    for (; n + 2 * Q32K_RP <= c1; n += 2 * Q32K_RP, park += 16 * Q32K_RP * T)
        q32k_tile(y + n, N, w + n * wrow, wrow, wblk, xr, ks, first, last, park, fmt, Q32K_RP, T, 2 * Q32K_RP);
    for (; n < c1; n += 2, park += 16 * T)
        q32k_tile(y + n, N, w + n * wrow, wrow, wblk, xr, ks, first, last, park, fmt, 1, T, c1 - n >= 2 ? 2 : 1);
}

/* The whole linear.token_major.v1 call: thread ith's columns in chunks of Q32K_NC (a chunk's weights stay
 * in cache across activation tiles), activation rows in tiles of Q32K_TT (then one at a time), K in slices
 * of Q32K_KS blocks (partials parked between slices). */
static inline void q32k_linear(float *y, const void *w, const void *x, int64_t M, int64_t N, int64_t K, int ith,
                               int nth, const int fmt) {
    const int64_t nb = K / 32;
    const int64_t wblk = KL_Q32_WBLK(fmt);
    const int64_t wrow = nb * wblk;
    int64_t lo, hi;
    km_part(N, ith, nth, &lo, &hi);
    const uint8_t *wb = (const uint8_t *)w;
    const uint8_t *xb = (const uint8_t *)x;
    q32k_xrow xr[Q32K_TT];
    float park[16 * (Q32K_NC / 2 + 1) * Q32K_TT] __attribute__((aligned(64)));
    for (int64_t c0 = lo; c0 < hi; c0 += Q32K_NC) {
        const int64_t c1 = hi - c0 > Q32K_NC ? c0 + Q32K_NC : hi;
        for (int64_t m0 = 0; m0 < M;) {
            const int T = M - m0 >= Q32K_TT ? Q32K_TT : 1;
            for (int64_t k0 = 0; k0 < nb; k0 += Q32K_KS) {
                const int64_t ks = nb - k0 > Q32K_KS ? Q32K_KS : nb - k0;
                for (int t = 0; t < T; t++) q32k_prep(&xr[t], xb + ((m0 + t) * nb + k0) * Q32K_XBLK, ks, fmt);
                const int first = k0 == 0, last = k0 + ks == nb;
                float *ym = y + m0 * N;
                const uint8_t *wk = wb + k0 * wblk;
                if (T == Q32K_TT) q32k_cols(ym, N, wk, wrow, wblk, xr, ks, first, last, park, c0, c1, fmt, Q32K_TT);
                else q32k_cols(ym, N, wk, wrow, wblk, xr, ks, first, last, park, c0, c1, fmt, 1);
            }
            m0 += T;
        }
    }
}

#endif /* KM_Q32_BODY_H */
