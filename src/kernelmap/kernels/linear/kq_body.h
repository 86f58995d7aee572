/* linear/kq_body.h — the family body of linear.q4_k.q8_k.f32.v1 and linear.q6_k.q8_k.f32.v1: kernelmap's own
 * order for the K-quant formats, written once against the lanes interface (common/km_lanes.h); every ISA
 * variant of these providers is an instantiation of it.
 *
 * Numerics (exactly linear/q4_k_q8_k_ref.c and linear/q6_k_q8_k_ref.c): per output (m, n), eight f32
 * partials p[0..7] = +0; super-block b contributes, in f32 with one rounding per operation and no fma,
 *   q4_K: p[b mod 8] += (fd * (float)isum) - (fm * (float)imin), fd = fp16(w.d) * x.d, fm = fp16(w.dmin) * x.d
 *   q6_K: p[b mod 8] += fd * (float)isum
 * with isum = sum_e sc(e) * q(e) * x.qs[e] (q6_K: minus 32 * sum_j sc[j] * bsums[j]) and imin = sum_j
 * mn[j] * (bsums[2j] + bsums[2j+1]), both exact int32; y = ((p0 + p4) + (p2 + p6)) + ((p1 + p5) + (p3 + p7))
 * = kl_f8_fold(p). Vectorized over blocks: a group of 8 blocks puts block b0 + j in lane j, so every lane
 * runs the ref's scalar steps for its blocks in increasing b. The integer sums come from kl_kqi_seed,
 * kl_kqi_dott and kl_kqi_store4 (isum) and kl_kq_imin4 (imin, the mins unpacked by km_q4k_scales64),
 * converted exactly by kl_f8_cvt_sum4 (|isum| < 2^24). A short last group's missing lanes have d = x.d = +0 and
 * sums 0, so they add +0 (or +0 - +0 = +0), which leaves a partial unchanged (a partial is never -0).
 *
 * Schedule (the instantiating file defines it before including this header):
 *   KQK_T   activation rows per tile: each unpacked weight half-block is reused KQK_T times (rows left
 *           over run one at a time)
 * Partition: output columns n (km_part over N); no output depends on M, tiling or (ith, nth).
 * The instantiating file defines the entry point (linear.token_major.v1 ABI) as a call of kqk_linear with
 * the format (KL_KQ_Q4_K or KL_KQ_Q6_K).
 */
#ifndef KM_KQ_BODY_H
#define KM_KQ_BODY_H

#include "km_kquant.h"
#include "km_lanes.h"

/* Byte offsets of the f16 d and (q4_K) dmin in a block. */
#define KQK_DOFF(fmt) ((fmt) == KL_KQ_Q6_K ? 208 : 0)
#define KQK_MOFF 2

/* One weight row wr (nb blocks) against T activation rows xr, xr + nb, ...: y[0], y[N], ... */
KL_INLINE void kqk_tile(float *y, int64_t N, const uint8_t *wr, const km_block_q8_k *xr, int64_t nb, const int fmt,
                        const int T) {
    const int64_t wblk = KL_KQ_WBLK(fmt);
    const int mins = fmt == KL_KQ_Q4_K;
    kl_f8 p[KQK_T];
    for (int t = 0; t < T; t++) p[t] = kl_f8_zero();
    for (int64_t b0 = 0; b0 < nb; b0 += 8) {
        const int cnt = nb - b0 < 8 ? (int)(nb - b0) : 8;
        int32_t ti[KQK_T][8][4], tm[KQK_T][8][4];
        float wd[8], wm[8], xd[KQK_T][8];
        for (int j = cnt; j < 8; j++) { /* absent blocks of a short last group: zero terms */
            wd[j] = wm[j] = 0.0f;
            for (int t = 0; t < T; t++) {
                xd[t][j] = 0.0f;
                for (int i = 0; i < 4; i++) ti[t][j][i] = tm[t][j][i] = 0;
            }
        }
        for (int j = 0; j < cnt; j++) {
            const int64_t b = b0 + j;
            const uint8_t *blk = wr + b * wblk;
            const kl_kqs s = kl_kqs_load(blk, fmt);
            kl_kqi acc[KQK_T];
            for (int t = 0; t < T; t++) acc[t] = kl_kqi_seed(s, &xr[t * nb + b], fmt);
            for (int h = 0; h < 2; h++) {
                kl_kqw wh;
                kl_kqw_load(&wh, blk, s, fmt, h);
                for (int t = 0; t < T; t++) acc[t] = kl_kqi_dott(acc[t], &wh, xr[t * nb + b].qs + 128 * h, fmt);
            }
            uint16_t hd, hm;
            uint64_t sc8, mn8 = 0;
            memcpy(&hd, blk + KQK_DOFF(fmt), 2);
            wd[j] = kl_h2f(hd);
            if (mins) {
                memcpy(&hm, blk + KQK_MOFF, 2);
                wm[j] = kl_h2f(hm);
                km_q4k_scales64(blk + 4, &sc8, &mn8);
            }
            for (int t = 0; t < T; t++) {
                kl_kqi_store4(ti[t][j], acc[t]);
                xd[t][j] = xr[t * nb + b].d;
                if (mins) kl_kq_imin4(tm[t][j], mn8, &xr[t * nb + b]);
            }
        }
        const kl_f8 vwd = kl_f8_loadu(wd);
        for (int t = 0; t < T; t++) {
            const kl_f8 vx = kl_f8_loadu(xd[t]);
            const kl_f8 t1 = kl_f8_mul(kl_f8_mul(vwd, vx), kl_f8_cvt_sum4((const int32_t(*)[4])ti[t]));
            if (mins) {
                const kl_f8 t2 = kl_f8_mul(kl_f8_mul(kl_f8_loadu(wm), vx), kl_f8_cvt_sum4((const int32_t(*)[4])tm[t]));
                p[t] = kl_f8_add(p[t], kl_f8_sub(t1, t2));
            } else {
                p[t] = kl_f8_add(p[t], t1);
            }
        }
    }
    for (int t = 0; t < T; t++) y[t * N] = kl_f8_fold(p[t]);
}

/* The whole linear.token_major.v1 call: thread ith's columns one weight row at a time, against KQK_T
 * activation rows at a time (then one at a time). */
static inline void kqk_linear(float *y, const void *w, const void *x, int64_t M, int64_t N, int64_t K, int ith,
                              int nth, const int fmt) {
    const int64_t nb = K / KM_QK_K;
    const uint8_t *wb = (const uint8_t *)w;
    const km_block_q8_k *xq = (const km_block_q8_k *)x;
    int64_t n0, n1;
    km_part(N, ith, nth, &n0, &n1);
    for (int64_t n = n0; n < n1; n++) {
        const uint8_t *wr = wb + n * nb * KL_KQ_WBLK(fmt);
        int64_t m = 0;
        for (; m + KQK_T <= M; m += KQK_T) kqk_tile(y + m * N + n, N, wr, xq + m * nb, nb, fmt, KQK_T);
        for (; m < M; m++) kqk_tile(y + m * N + n, N, wr, xq + m * nb, nb, fmt, 1);
    }
}

#endif /* KM_KQ_BODY_H */
