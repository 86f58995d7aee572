/* linear/q_k_repack_ggml_body.h — the family body of linear.q4_k.q8_k.ggml.v1 and linear.q2_k.q8_k.ggml.v1
 * (llama.cpp's x86 order for the K-quants it repacks 8 rows at a time: its q4_K / q2_K 8x8 gemv and
 * gemm), written once against the lanes interface (common/km_lanes.h); every ISA variant of the two
 * providers is an instantiation of it.
 *
 * Numerics (exactly linear/q4_k_q8_k_ggml_ref.c and linear/q2_k_q8_k_ggml_ref.c), for N % 8 == 0 (the
 * tensors llama.cpp repacks; N % 8 != 0 goes to its vec_dot order: linear/q_k_vecdot_ggml_body.h, so
 * the instantiating file also sets that body's schedule): per output (m, n) two f32 chains from +0;
 * for the superblocks b in increasing order, with the block's codes q(e), scales sc(e) and mins,
 *     isum = sum_e sc(e) * q(e) * x(e)                       (exact int32)
 *     imin = sum of min * (the activation's bsums it covers)  (exact int32)
 *     acc  = fma((float)isum, f32(fp16(w.d) * x.d), acc);  accm = fma((float)imin, f32(fp16(w.dmin) * x.d), accm)
 * and y = acc - accm. No float operation crosses columns: the 8 columns of a tile are the 8 lanes of a
 * kl_f8 (lane j = column n0 + j), so every y[m][n] sees exactly the ref's sequence whatever the tiling,
 * M or (ith, nth).
 *
 * Tiling: 8 weight rows (columns; fewer at the slice end, absent lanes are zero and never stored)
 * against KQR_MT activation rows (then 4, then 1 for the tail of M); each unpacked weight half-block
 * is reused for every row of the tile. Superblocks go in chunks of KQR_BC whose isums are computed
 * column by column (each weight row streams sequentially: interleaving the 8 rows in smaller pieces
 * halved cold decode speed at K = 2048 on x86), then, per block in order, the imins of the 8 columns
 * and the float steps.
 * One activation row (decode, M = 1) on lanes with KL_KQ1 (AVX-512) goes to kqr_row1 instead: the same
 * chunks and streams, but the GEMV is bound by the vector ports, so its column step is cut to what the
 * integer dot needs (q4_K: 6 unpack, 4 vpdpbusd, 2 vpackssdw, 2 vpmaddwd/vpdpwssd, 3 to place the scales):
 * codes from whole 64-byte loads (the activation blocks of a chunk are re-laid once for the 8 columns to
 * match), q4_K's scales and mins unpacked in general registers, and a column's block isum left as 16 int32
 * partials; once per block the 8 columns' partials, mins (one vpmaddwd per 4 or 2 columns) and d / dmin are
 * folded together. The integer sums are exact, so their order is free; the float steps are kqr_tile's.
 * Schedule (the instantiating file defines these before including this header):
 *   KQR_MT  largest activation-row tile (8 or 4)
 *   KQR_BC  superblocks per chunk
 *   KQR_BC1 optional: kqr_row1's superblocks per chunk (default KQR_BC)
 *   KQR_PF  1: software prefetch (to L2) of the blocks the next group of 8 columns reads at the same position, 8
 *           weight rows on; 0: none. (A distance along each row, 8 KiB before, fell inside the current group's
 *           own rows whenever a row is shorter than 8 KiB, or 1-2 rows on for longer ones: rows the tile was
 *           already reading. The next group's blocks: cold q4_K GEMV on one Zen 5 core +6-10% at K = 2048,
 *           +65% at K = 8192.)
 *   KQV_MT, KQV_CHUNK  the vec_dot body's (N % 8 != 0)
 *   KQG_MT, KQG_KB, KQG_FA, KQG_MIN_M  optional (lanes with KL_IV): batches of M >= KQG_MIN_M rows go to
 *              the register-blocked GEMM of linear/q_k_gemm_body.h (same numerics)
 * Partition: output columns n (km_part over N); groups of 8 start at the thread's own first column.
 * The instantiating file defines the entry point (linear.token_major.v1 ABI) as a call of kqr_linear.
 */
#ifndef KM_Q_K_REPACK_GGML_BODY_H
#define KM_Q_K_REPACK_GGML_BODY_H

#include "km_kquant.h"
#include "km_lanes.h"
#include "q_k_vecdot_ggml_body.h"
#ifdef KQG_MT /* the instantiation also sets the prefill GEMM's schedule */
#include "q_k_gemm_body.h"
#endif

/* Byte offsets of the f16 d and dmin of a block. */
/* The prefetch distance of kqr_tile / kqr_row1 in bytes: the next 8-column group's rows (see KQR_PF). */
#define KQR_PFD(wrow) (KQR_PF ? 8 * (wrow) : 0)

#define KQR_DOFF(fmt) ((fmt) == KL_KQ_Q2_K ? 80 : 0)
#define KQR_MOFF(fmt) ((fmt) == KL_KQ_Q2_K ? 82 : 2)

/* The block's sub-block mins for kl_f8_kq_imin: q2_K 16 (high nibbles of its scales), q4_K 8 (6 bits). */
KL_INLINE void kqr_mins(const uint8_t *blk, const int fmt, uint8_t *mn) {
    if (fmt == KL_KQ_Q2_K) {
        uint64_t a, b;
        memcpy(&a, blk, 8);
        memcpy(&b, blk + 8, 8);
        a = (a >> 4) & 0x0F0F0F0F0F0F0F0FULL;
        b = (b >> 4) & 0x0F0F0F0F0F0F0F0FULL;
        memcpy(mn, &a, 8);
        memcpy(mn + 8, &b, 8);
    } else {
        uint64_t sc, m;
        km_q4k_scales64(blk + 4, &sc, &m);
        memcpy(mn, &m, 8);
    }
}

/* Output tile y[r][j] (row stride N) for r < MT, j < nc: weight rows w + j * wrow, activation rows
 * x + r * nb (nb blocks each). MT is a compile-time KQR_MT, 4 or 1; nc is 8 or the slice's short group. */
KL_INLINE void kqr_tile(float *y, int64_t N, const uint8_t *w, int64_t wrow, const km_block_q8_k *x, int64_t nb,
                        const int fmt, const int nc, const int MT) {
    const int64_t wblk = KL_KQ_WBLK(fmt);
    const int nmin = KL_KQ_NMIN(fmt);
    int32_t ti[KQR_MT][KQR_BC][8][4] __attribute__((aligned(32)));
    uint8_t mins[KQR_BC][8 * 16] __attribute__((aligned(32))); /* column j's mins at nmin * j */
    uint16_t hd[KQR_BC][8], hm[KQR_BC][8];                       /* the columns' f16 d and dmin */
    kl_f8 acc[KQR_MT], accm[KQR_MT];
    for (int r = 0; r < MT; r++) {
        acc[r] = kl_f8_zero();
        accm[r] = kl_f8_zero();
    }
    for (int bb = 0; bb < KQR_BC; bb++) { /* absent columns: zero terms, lanes never stored */
        for (int j = nc; j < 8; j++) {
            memset(mins[bb] + nmin * j, 0, (size_t)nmin);
            hd[bb][j] = hm[bb][j] = 0;
            for (int r = 0; r < MT; r++) memset(ti[r][bb][j], 0, sizeof ti[r][bb][j]);
        }
    }
    for (int64_t b0 = 0; b0 < nb; b0 += KQR_BC) {
        const int bc = nb - b0 < KQR_BC ? (int)(nb - b0) : KQR_BC;
        for (int j = 0; j < nc; j++) {
            for (int bb = 0; bb < bc; bb++) {
                const uint8_t *blk = kqv_block(w + j * wrow, b0 + bb, wblk, KQR_PFD(wrow));
                const kl_kqs s = kl_kqs_load(blk, fmt);
                kqr_mins(blk, fmt, mins[bb] + nmin * j);
                memcpy(&hd[bb][j], blk + KQR_DOFF(fmt), 2);
                memcpy(&hm[bb][j], blk + KQR_MOFF(fmt), 2);
                kl_kqi ai[KQR_MT];
                for (int r = 0; r < MT; r++) ai[r] = kl_kqi_zero();
                for (int h = 0; h < 2; h++) {
                    kl_kqw wh;
                    kl_kqw_loadf(&wh, blk, s, fmt, h);
                    for (int r = 0; r < MT; r++) ai[r] = kl_kqi_dott(ai[r], &wh, x[r * nb + b0 + bb].qs + 128 * h, fmt);
                }
                for (int r = 0; r < MT; r++) kl_kqi_store4(ti[r][bb][j], ai[r]);
            }
        }
        for (int bb = 0; bb < bc; bb++) {
            const int64_t b = b0 + bb;
            const kl_f8 wd = kl_f8_f16x8(hd[bb]);
            const kl_f8 wm = kl_f8_f16x8(hm[bb]);
            const kl_kqm mk = kl_kqm_load(mins[bb], fmt);
            for (int r = 0; r < MT; r++) {
                const km_block_q8_k *xb = &x[r * nb + b];
                const kl_f8 xd = kl_f8_set1(xb->d);
                acc[r] = kl_f8_fma(kl_f8_cvt_sum4(ti[r][bb]), kl_f8_mul(wd, xd), acc[r]);
                accm[r] = kl_f8_fma(kl_f8_kq_imin(&mk, xb, fmt), kl_f8_mul(wm, xd), accm[r]);
            }
        }
    }
    for (int r = 0; r < MT; r++) {
        const kl_f8 v = kl_f8_sub(acc[r], accm[r]);
        if (nc == 8) {
            kl_f8_storeu(y + r * N, v);
        } else {
            float t[8];
            kl_f8_storeu(t, v);
            memcpy(y + r * N, t, sizeof(float) * (size_t)nc);
        }
    }
}

#if defined(KL_KQ1)
#ifndef KQR_BC1
#define KQR_BC1 KQR_BC
#endif
/* One activation row (decode) against one group of nc columns: the schedule of kqr_tile (chunks of KQR_BC1
 * superblocks, each weight row streamed through a chunk before the next), but a column's block isum is
 * kept as the 16 int32 lanes of kl_kq1_isum and the 8 columns are folded together once per block
 * (kl_f8_kq1_sum8); the activation blocks of a chunk are re-laid once for the 8 columns (kl_kq1x_load).
 * The float steps are kqr_tile's, in the same order. */
KL_INLINE void kqr_row1(float *y, const uint8_t *w, int64_t wrow, const km_block_q8_k *x, int64_t nb, const int fmt,
                        const int nc) {
    const int64_t wblk = KL_KQ_WBLK(fmt);
    kl_kq1x xs[KQR_BC1];
    kl_kq1i ti[KQR_BC1][8];
    uint8_t hs[KQR_BC1][8][16] __attribute__((aligned(64))); /* the columns' scales / mins (kl_kq1_isum) */
    uint32_t dm[KQR_BC1][8];   /* the columns' f16 d (low half) and dmin (high half) */
    kl_f8 acc = kl_f8_zero(), accm = kl_f8_zero();
    for (int bb = 0; bb < KQR_BC1; bb++) { /* absent columns: zero terms, lanes never stored */
        for (int j = nc; j < 8; j++) {
            memset(hs[bb][j], 0, sizeof hs[bb][j]);
            dm[bb][j] = 0;
            memset(&ti[bb][j], 0, sizeof ti[bb][j]);
        }
    }
    for (int64_t b0 = 0; b0 < nb; b0 += KQR_BC1) {
        const int bc = nb - b0 < KQR_BC1 ? (int)(nb - b0) : KQR_BC1;
        for (int bb = 0; bb < bc; bb++) kl_kq1x_load(&xs[bb], &x[b0 + bb], fmt);
        for (int j = 0; j < nc; j++) {
            for (int bb = 0; bb < bc; bb++) {
                const uint8_t *blk = kqv_block(w + j * wrow, b0 + bb, wblk, KQR_PFD(wrow));
                /* the next column's same block, ~8 blocks of work ahead: into L1 (+4-9% with the weights in L2) */
                for (int64_t o = 0; o < wblk; o += 64) kl_prefetch_l1(blk + wrow + o);
                memcpy(&dm[bb][j], blk + KQR_DOFF(fmt), 4);
                ti[bb][j] = kl_kq1_isum(blk, &xs[bb], fmt, hs[bb][j]);
            }
        }
        for (int bb = 0; bb < bc; bb++) {
            const km_block_q8_k *xb = &x[b0 + bb];
            const kl_f8 xd = kl_f8_set1(xb->d);
            kl_f8 wd, wm;
            kl_f8_kq1_f16pair(dm[bb], &wd, &wm);
            acc = kl_f8_fma(kl_f8_kq1_sum8(ti[bb]), kl_f8_mul(wd, xd), acc);
            accm = kl_f8_fma(kl_f8_kq1_imin8(hs[bb][0], xb, fmt), kl_f8_mul(wm, xd), accm);
        }
    }
    const kl_f8 v = kl_f8_sub(acc, accm);
    if (nc == 8) {
        kl_f8_storeu(y, v);
    } else {
        float t[8];
        kl_f8_storeu(t, v);
        memcpy(y, t, sizeof(float) * (size_t)nc);
    }
}
#endif

/* All rows of one group of nc columns: tiles of KQR_MT rows, then 4, then singles. */
KL_INLINE void kqr_cols(float *y, int64_t N, const uint8_t *w, int64_t wrow, const km_block_q8_k *x, int64_t M,
                        int64_t nb, const int fmt, const int nc) {
    int64_t m = 0;
    for (; m + KQR_MT <= M; m += KQR_MT) kqr_tile(y + m * N, N, w, wrow, x + m * nb, nb, fmt, nc, KQR_MT);
#if KQR_MT > 4
    for (; m + 4 <= M; m += 4) kqr_tile(y + m * N, N, w, wrow, x + m * nb, nb, fmt, nc, 4);
#endif
#if defined(KL_KQ1)
    for (; m < M; m++) kqr_row1(y + m * N, w, wrow, x + m * nb, nb, fmt, nc);
#else
    for (; m < M; m++) kqr_tile(y + m * N, N, w, wrow, x + m * nb, nb, fmt, nc, 1);
#endif
}

/* The whole linear.token_major.v1 call: thread ith's columns in groups of 8. */
static inline void kqr_linear(float *y, const void *w, const void *x, int64_t M, int64_t N, int64_t K, int ith,
                              int nth, const int fmt) {
    if (N % 8 != 0) { /* llama.cpp repacks only tensors of 8k rows; the others go through its vec_dot */
        kqv_linear(y, w, x, M, N, K, ith, nth, fmt);
        return;
    }
    const int64_t nb = K / KM_QK_K;
    const int64_t wrow = nb * KL_KQ_WBLK(fmt);
    int64_t n0, n1;
    km_part(N, ith, nth, &n0, &n1);
    const uint8_t *wb = (const uint8_t *)w;
    const km_block_q8_k *xq = (const km_block_q8_k *)x;
#ifdef KQG_MT
    if (M >= KQG_MIN_M) {
        kqg_drive(y, wb, xq, M, N, nb, n0, n1, fmt, 0);
        return;
    }
#endif
    for (int64_t n = n0; n < n1; n += 8) {
        if (n + 8 <= n1) kqr_cols(y + n, N, wb + n * wrow, wrow, xq, M, nb, fmt, 8);
        else kqr_cols(y + n, N, wb + n * wrow, wrow, xq, M, nb, fmt, (int)(n1 - n));
    }
}

#endif /* KM_Q_K_REPACK_GGML_BODY_H */
