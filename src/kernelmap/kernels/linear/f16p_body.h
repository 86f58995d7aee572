/* linear/f16p_body.h — the family body of linear.f32.f32.f32.v1 and linear.q8_0.f32.f32.v1: kernelmap's own
 * order for weights against f32 activations (16 partials), written once against the lanes interface
 * (common/km_lanes.h); every ISA variant of these providers is an instantiation of it.
 *
 * Numerics (exactly linear/f32_f32_ref.c and linear/q8_0_f32_ref.c): per output (m, n), 16 f32 partials
 * from +0, p[k mod 16] = fma(w[n][k], x[m][k], p[k mod 16]) for increasing k, where a q8_0 weight is
 * dequantized exactly first (fp16(d_b) * (float)q_k, one f32 multiply); then s[l] = p[l] + p[l + 8] and
 * y = ((s0 + s4) + (s2 + s6)) + ((s1 + s5) + (s3 + s7)) = kl_f16v_fold(p). The partials are the 16 lanes of
 * one kl_f16v: elements k .. k + 15 (k a multiple of 16) update lanes 0 .. 15 with one fma each. An f32 K
 * tail (K mod 16) is loaded with kl_f16v_loadn: its missing lanes are +0 in both operands, and
 * fma(+0, +0, p) = p since a partial is never -0.
 *
 * Schedule (the instantiating file defines these before including this header):
 *   KF16_R   weight rows per tile (independent chains sharing each activation load)
 *   KF16_T   activation rows per tile (each weight load, or dequantized q8_0 block, is reused KF16_T times);
 *            rows left over run one at a time
 * Partition: output columns n (km_part over N); no output depends on M, tiling or (ith, nth).
 * The instantiating file defines the entry point (linear.token_major.v1 ABI) as a call of kf16_linear with
 * the weight format: KF16_F32 or KF16_Q8_0.
 */
#ifndef KM_F16P_BODY_H
#define KM_F16P_BODY_H

#include "km_lanes.h"

#define KF16_F32 0
#define KF16_Q8_0 8

/* R weight rows (f32 rows of K floats, or q8_0 rows of K / 32 blocks, wrow bytes apart) x T activation
 * rows (K floats each, xrow floats apart): y[t * N + r]. */
KL_INLINE void kf16_tile(float *y, int64_t N, const uint8_t *w, int64_t wrow, const float *x, int64_t xrow, int64_t K,
                         const int fmt, const int R, const int T) {
    kl_f16v acc[KF16_R * KF16_T];
    for (int i = 0; i < R * T; i++) acc[i] = kl_f16v_zero();
    if (fmt == KF16_Q8_0) {
        for (int64_t b = 0; b < K / 32; b++) {
            kl_f16v w0[KF16_R], w1[KF16_R];
            for (int r = 0; r < R; r++) {
                const uint8_t *blk = w + r * wrow + b * 34;
                km_half h;
                memcpy(&h, blk, 2);
                const kl_f16v d = kl_f16v_set1(km_fp16_to_fp32(h));
                w0[r] = kl_f16v_mul(d, kl_f16v_cvt_i8((const int8_t *)(blk + 2)));
                w1[r] = kl_f16v_mul(d, kl_f16v_cvt_i8((const int8_t *)(blk + 18)));
            }
            for (int t = 0; t < T; t++) {
                const kl_f16v x0 = kl_f16v_loadu(x + t * xrow + 32 * b), x1 = kl_f16v_loadu(x + t * xrow + 32 * b + 16);
                for (int r = 0; r < R; r++) {
                    acc[r * T + t] = kl_f16v_fma(w0[r], x0, acc[r * T + t]);
                    acc[r * T + t] = kl_f16v_fma(w1[r], x1, acc[r * T + t]);
                }
            }
        }
    } else {
        const float *wf = (const float *)(const void *)w;
        const int64_t ws = wrow / 4;
        int64_t k = 0;
        for (; k + 16 <= K; k += 16) {
            for (int t = 0; t < T; t++) {
                const kl_f16v xv = kl_f16v_loadu(x + t * xrow + k);
                for (int r = 0; r < R; r++) acc[r * T + t] = kl_f16v_fma(kl_f16v_loadu(wf + r * ws + k), xv, acc[r * T + t]);
            }
        }
        if (k < K) {
            const int n = (int)(K - k);
            for (int t = 0; t < T; t++) {
                const kl_f16v xv = kl_f16v_loadn(x + t * xrow + k, n);
                for (int r = 0; r < R; r++) acc[r * T + t] = kl_f16v_fma(kl_f16v_loadn(wf + r * ws + k, n), xv, acc[r * T + t]);
            }
        }
    }
    for (int r = 0; r < R; r++)
        for (int t = 0; t < T; t++) y[t * N + r] = kl_f16v_fold(acc[r * T + t]);
}

/* Columns [n0, n0 + R) against every activation row: KF16_T rows at a time, then one at a time. */
KL_INLINE void kf16_cols(float *y, int64_t N, const uint8_t *w, int64_t wrow, const float *x, int64_t M, int64_t K,
                         const int fmt, const int R) {
    int64_t m = 0;
    for (; m + KF16_T <= M; m += KF16_T) kf16_tile(y + m * N, N, w, wrow, x + m * K, K, K, fmt, R, KF16_T);
    for (; m < M; m++) kf16_tile(y + m * N, N, w, wrow, x + m * K, K, K, fmt, R, 1);
}

/* The whole linear.token_major.v1 call: thread ith's columns in tiles of KF16_R, then one at a time. */
static inline void kf16_linear(float *y, const void *w, const float *x, int64_t M, int64_t N, int64_t K, int ith,
                               int nth, const int fmt) {
    const int64_t wrow = fmt == KF16_Q8_0 ? K / 32 * 34 : K * 4;
    const uint8_t *wb = (const uint8_t *)w;
    int64_t lo, hi;
    km_part(N, ith, nth, &lo, &hi);
    int64_t n = lo;
    for (; n + KF16_R <= hi; n += KF16_R) kf16_cols(y + n, N, wb + n * wrow, wrow, x, M, K, fmt, KF16_R);
    for (; n < hi; n++) kf16_cols(y + n, N, wb + n * wrow, wrow, x, M, K, fmt, 1);
}

#endif /* KM_F16P_BODY_H */
