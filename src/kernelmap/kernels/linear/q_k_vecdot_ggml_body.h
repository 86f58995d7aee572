/* linear/q_k_vecdot_ggml_body.h — the family body of linear.q3_k.q8_k.ggml.v1, linear.q5_k.q8_k.ggml.v1
 * and linear.q6_k.q8_k.ggml.v1 (llama.cpp's x86 vec_dot_q3_K_q8_K / q5_K / q6_K order: the K-quants it
 * does not repack on x86) and of the q2_K / q4_K contracts for weights of N % 8 != 0 rows (which llama.cpp
 * does not repack either: its vec_dot_q2_K_q8_K / q4_K order), written once against the lanes interface
 * (common/km_lanes.h); every ISA variant of those providers is an instantiation of it.
 *
 * Numerics (exactly linear/q3_k_q8_k_ggml_ref.c, q5_k_q8_k_ggml_ref.c, q6_k_q8_k_ggml_ref.c): per output
 * (m, n) eight f32 lanes acc[l] from +0; for the superblocks b in increasing order, lane[l] = the exact
 * int32 sum of sc(e) * q(e) * x(e) over the values e = 32c + 4l + i (c < 8, i < 4), plus for q6_K the
 * offset -32 * (sc[2l] * bsums[2l] + sc[2l+1] * bsums[2l+1]); t = f32(x.d * fp16(w.d));
 * acc[l] = fma(t, (float)lane[l], acc[l]). q5_K also keeps one f32 min chain from +0:
 * summ = fma((float)imin, -(f32(x.d * fp16(w.dmin))), summ), imin = sum_j mn[j] * (bsums[2j] + bsums[2j+1]).
 * q2_K first adds its min lanes into the same accumulator, acc[l] = fma(-(f32(x.d * fp16(w.dmin))),
 * (float)P[l], acc[l]) with P[l] = mn[2l] * bsums[2l] + mn[2l+1] * bsums[2l+1]; q4_K keeps them in a
 * 4-lane chain accm[k] = fma(-(f32(x.d * fp16(w.dmin))), (float)P4[k], accm[k]) (kl_f8_kq_minlanes).
 * y = kl_f8_fold(acc) (q5_K: + summ; q4_K: + ((accm0 + accm2) + (accm1 + accm3))). Only the order of the fmas within one (m, n) matters; tiles and
 * threads split columns and rows, never one output's chain.
 *
 * Tiling: one weight row against KQV_MT activation rows (then halves, down to 1); each unpacked weight
 * half-block is reused for every row of the tile, and two rows share each float step (a kl_f8x2 row pair). The thread's columns go in chunks of about KQV_CHUNK
 * bytes of weights (kept in L2 while every row tile passes over them).
 * Schedule (the instantiating file defines these before including this header):
 *   KQV_MT     largest activation-row tile (8, 4 or 2)
 *   KQV_CHUNK  bytes of weights per column chunk
 *   KQV_PF     software prefetch distance in bytes (to L2) along the weight row stream (0: none); at M = 1
 *              the thread's rows are one contiguous forward stream, and the hardware prefetchers alone
 *              left decode GEMVs at ~50% of the read bandwidth
 *   KQV_VMIN   optional, 1: q5_K's min sum at M = 1 by vpmaddwd and an int32 fold (kl_kq_imin1) instead of
 *              8 scalar multiply-adds (exact either way; Zen 3 AVX2: +9% hot, the scalar form spilled)
 *   KQV_Q3X_NC optional, 1 or 2 (default): columns per float step of kqv_row1_q3 (AVX2: 1; with its 16 ymm
 *              the pairs ran slower, Zen 3 hot 22.4 vs 25.9 GMAC/s)
 *   KQG_MT, KQG_KB, KQG_FA, KQG_MIN_M  optional (lanes with KL_IV): q6_K / q5_K / q3_K batches of M >= KQG_MIN_M rows go to
 *              the register-blocked GEMM of linear/q_k_gemm_body.h (same numerics)
 * q3_K at M = 1 on lanes with KL_KQ3X (AVX-512, AVX2) and K <= 16384 goes to kqv_row1_q3: the same steps for one
 * row, but the codes + 4 (unsigned) are dotted and the activation's -4 * x sums (made once per call) add the
 * -4 (VNNI: one vpdpbusd onto them and one vpdpwssd by the scales per 64 values, instead of two vpmaddubsw,
 * a subtraction and a vpdpwssd), two columns sharing each float step (a kl_f8x2 pair): the vector ports
 * bound this GEMV (VNNI +16-18% measured at 512x2048, the column pairs a few % more).
 * Partition: output columns n (km_part over N); every thread computes all M rows of its columns.
 * The instantiating file defines the entry point (linear.token_major.v1 ABI) as a call of kqv_linear.
 */
#ifndef KM_Q_K_VECDOT_GGML_BODY_H
#define KM_Q_K_VECDOT_GGML_BODY_H

#ifndef KQV_VMIN
#define KQV_VMIN 0
#endif
#ifndef KQV_Q3X_NC
#define KQV_Q3X_NC 2
#endif

#include "km_kquant.h"
#include "km_lanes.h"
#ifdef KQG_MT /* the instantiation also sets a prefill GEMM schedule (linear/q_k_gemm_body.h) */
#include "q_k_gemm_body.h"
#endif

/* Byte offsets of the f16 d and dmin of a block. */
#define KQV_DOFF(fmt) ((fmt) == KL_KQ_Q2_K ? 80 : (fmt) == KL_KQ_Q3_K ? 108 : (fmt) == KL_KQ_Q6_K ? 208 : 0)
#define KQV_MOFF(fmt) ((fmt) == KL_KQ_Q2_K ? 82 : 2)

/* Block b (of wblk bytes) of the weight row at wr, the stream prefetched pf bytes ahead (to L2; pf a
 * compile-time schedule knob, 0: none). */
KL_INLINE const uint8_t *kqv_block(const uint8_t *wr, int64_t b, int64_t wblk, const int64_t pf) {
    const uint8_t *blk = wr + b * wblk;
    for (int64_t o = 0; pf > 0 && o < wblk; o += 64) kl_prefetch_l2(blk + pf + o);
    return blk;
}

/* One weight row wr (nb blocks) against MT activation rows xr, xr + nb, ...: y[0], y[N], ... */
KL_INLINE void kqv_row_tile(float *y, int64_t N, const uint8_t *wr, const km_block_q8_k *xr, int64_t nb,
                            const int fmt, const int MT) {
    const int64_t wblk = KL_KQ_WBLK(fmt);
    /* q2_K / q4_K (their vec_dot orders) carry a lane min chain: one row per float step; the others pair rows */
    const int lane_mins = fmt == KL_KQ_Q2_K || fmt == KL_KQ_Q4_K;
    const int pairs = MT > 1 && !lane_mins;
    kl_f8 facc[KQV_MT], faccm[KQV_MT]; /* per row (faccm: q4_K's 4-lane min chain, lanes 4-7 stay +0) */
    kl_f8x2 facc2[KQV_MT / 2];         /* pairs: rows 2p, 2p + 1 */
    float summ[KQV_MT];                /* q5_K's scalar min chain */
    for (int r = 0; r < MT; r++) {
        facc[r] = faccm[r] = kl_f8_zero();
        summ[r] = 0.0f;
    }
    for (int p = 0; p < MT / 2; p++) facc2[p] = kl_f8x2_zero();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blk = kqv_block(wr, b, wblk, KQV_PF);
        const kl_kqs s = kl_kqs_load(blk, fmt);
        kl_kqi ai[KQV_MT];
        for (int r = 0; r < MT; r++) ai[r] = kl_kqi_seed(s, &xr[r * nb + b], fmt);
        for (int h = 0; h < 2; h++) {
            kl_kqw wh;
            kl_kqw_loadf(&wh, blk, s, fmt, h);
            for (int r = 0; r < MT; r++) ai[r] = kl_kqi_dot(ai[r], &wh, xr[r * nb + b].qs + 128 * h, fmt);
        }
        uint16_t hd, hm;
        memcpy(&hd, blk + KQV_DOFF(fmt), 2);
        memcpy(&hm, blk + KQV_MOFF(fmt), 2);
        const float wd = kl_h2f(hd), wm = kl_h2f(hm);
        if (pairs) {
            const kl_f8x2 wd2 = kl_f8x2_set2(wd, wd);
            for (int p = 0; p < MT / 2; p++) {
                const kl_f8x2 t = kl_f8x2_mul(kl_f8x2_set2(xr[2 * p * nb + b].d, xr[(2 * p + 1) * nb + b].d), wd2);
                facc2[p] = kl_f8x2_fma(t, kl_kqi_lanes2(ai[2 * p], ai[2 * p + 1]), facc2[p]);
            }
        } else {
            for (int r = 0; r < MT; r++) {
                const km_block_q8_k *xb = &xr[r * nb + b];
                if (lane_mins) { /* the min term first: q2_K into the same lanes, q4_K into its own chain */
                    const kl_f8 tm = kl_f8_set1(-kl_f32_mul(xb->d, wm));
                    const kl_f8 pm = kl_f8_kq_minlanes(blk, xb, fmt);
                    if (fmt == KL_KQ_Q2_K) facc[r] = kl_f8_fma(tm, pm, facc[r]);
                    else faccm[r] = kl_f8_fma(tm, pm, faccm[r]);
                }
                facc[r] = kl_f8_fma(kl_f8_set1(kl_f32_mul(xb->d, wd)), kl_kqi_lanes(ai[r]), facc[r]);
            }
        }
        if (fmt == KL_KQ_Q5_K) { /* a tile, or KQV_VMIN: vector; else one row scalar (where the vector ports bind) */
            uint64_t sc, mn;
            km_q4k_scales64(blk + 4, &sc, &mn);
            for (int r = 0; r < MT; r++) {
                const km_block_q8_k *xb = &xr[r * nb + b];
                int32_t imin = 0;
                if (MT > 1 || KQV_VMIN) {
                    imin = kl_kq_imin1(blk, xb, fmt);
                } else {
                    for (int j = 0; j < 8; j++)
                        imin += (int32_t)((mn >> (8 * j)) & 0xFF) * ((int32_t)xb->bsums[2 * j] + xb->bsums[2 * j + 1]);
                }
                summ[r] = kl_f32_fma((float)imin, -kl_f32_mul(xb->d, wm), summ[r]);
            }
        }
    }
    float v[KQV_MT];
    if (pairs) {
        for (int p = 0; p < MT / 2; p++) kl_f8x2_fold(facc2[p], &v[2 * p], &v[2 * p + 1]);
    } else {
        for (int r = 0; r < MT; r++) v[r] = kl_f8_fold(facc[r]);
    }
    for (int r = 0; r < MT; r++) {
        if (fmt == KL_KQ_Q5_K) v[r] = kl_f32_add(v[r], summ[r]);
        if (fmt == KL_KQ_Q4_K) v[r] = kl_f32_add(v[r], kl_f8_fold(faccm[r]));
        y[r * N] = v[r];
    }
}

#if defined(KL_KQ3X)
/* q3_K at M = 1 (lanes with KL_KQ3X: AVX-512, AVX2): kqv_row_tile's steps for one row and NC (1 or 2) columns
 * y[j], weight rows wr + j * wrow, the integer dot by kl_kqi_dot_q3x against the activation blocks' kl_kq3x
 * c (built once per call: the same contract lanes); two columns share each float step as a kl_f8x2 pair
 * (kqv_row_tile's row pairs: the same operations per output). */
#define KQV_Q3X_NB 64 /* most superblocks (K <= 16384) for the kl_kq3x table on the stack (16 KB) */
KL_INLINE void kqv_row1_q3(float *y, const uint8_t *wr, int64_t wrow, const km_block_q8_k *xr, const kl_kq3x *c,
                           int64_t nb, const int NC) {
    const int fmt = KL_KQ_Q3_K;
    const int64_t wblk = KL_KQ_WBLK(fmt);
    kl_f8 facc = kl_f8_zero();
    kl_f8x2 facc2 = kl_f8x2_zero();
    for (int64_t b = 0; b < nb; b++) {
        kl_kqi ai[2];
        float t[2];
        for (int j = 0; j < NC; j++) {
            const uint8_t *blk = kqv_block(wr + j * wrow, b, wblk, KQV_PF);
            const kl_kqs s = kl_kqs_load(blk, fmt);
            ai[j] = kl_kqi_zero();
            for (int h = 0; h < 2; h++) {
                kl_kqw wh;
                kl_kqw_load_q3x(&wh, blk, s, h);
                ai[j] = kl_kqi_dot_q3x(ai[j], &wh, xr[b].qs + 128 * h, &c[b], h);
            }
            uint16_t hd;
            memcpy(&hd, blk + KQV_DOFF(fmt), 2);
            t[j] = kl_f32_mul(xr[b].d, kl_h2f(hd));
        }
        if (NC == 2) facc2 = kl_f8x2_fma(kl_f8x2_set2(t[0], t[1]), kl_kqi_lanes2(ai[0], ai[1]), facc2);
        else facc = kl_f8_fma(kl_f8_set1(t[0]), kl_kqi_lanes(ai[0]), facc);
    }
    if (NC == 2) kl_f8x2_fold(facc2, &y[0], &y[1]);
    else y[0] = kl_f8_fold(facc);
}
#endif

/* Columns [c0, c1) against activation rows [m, m + T * k) in tiles of T (compile-time). */
#define KQV_TILES(T)                                                                                       \
    for (; m + (T) <= M; m += (T))                                                                         \
        for (int64_t n = c0; n < c1; n++) kqv_row_tile(y + m * N + n, N, wb + n * wrow, xq + m * nb, nb, fmt, (T));

/* The whole linear.token_major.v1 call. */
static inline void kqv_linear(float *y, const void *w, const void *x, int64_t M, int64_t N, int64_t K, int ith,
                              int nth, const int fmt) {
    const int64_t nb = K / KM_QK_K;
    const int64_t wrow = nb * KL_KQ_WBLK(fmt);
    int64_t n0, n1;
    km_part(N, ith, nth, &n0, &n1);
    const uint8_t *wb = (const uint8_t *)w;
    const km_block_q8_k *xq = (const km_block_q8_k *)x;
#ifdef KQG_MT
    if (KQG_VECDOT(fmt) && M >= KQG_MIN_M) {
        kqg_drive(y, wb, xq, M, N, nb, n0, n1, fmt, 0);
        return;
    }
#endif
#if defined(KL_KQ3X)
    if (fmt == KL_KQ_Q3_K && M == 1 && nb <= KQV_Q3X_NB) {
        kl_kq3x c[KQV_Q3X_NB];
        for (int64_t b = 0; b < nb; b++) kl_kq3x_load(&c[b], &xq[b]);
        int64_t n = n0;
        for (; KQV_Q3X_NC == 2 && n + 2 <= n1; n += 2) kqv_row1_q3(y + n, wb + n * wrow, wrow, xq, c, nb, 2);
        for (; n < n1; n++) kqv_row1_q3(y + n, wb + n * wrow, wrow, xq, c, nb, 1);
        return;
    }
#endif
    int64_t cc = wrow > 0 ? KQV_CHUNK / wrow : n1 - n0; /* K = 0: one chunk */
    if (cc < 1) cc = 1;
    for (int64_t c0 = n0; c0 < n1; c0 += cc) {
        const int64_t c1 = c0 + cc < n1 ? c0 + cc : n1;
        int64_t m = 0;
        KQV_TILES(KQV_MT)
#if KQV_MT > 4
        KQV_TILES(4)
#endif
#if KQV_MT > 2
        KQV_TILES(2)
#endif
        KQV_TILES(1)
    }
}

#endif /* KM_Q_K_VECDOT_GGML_BODY_H */
