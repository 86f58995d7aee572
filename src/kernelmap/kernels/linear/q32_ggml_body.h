/* linear/q32_ggml_body.h — the family body of linear.<w>.<a>.ggml.v1 for the 32-element formats (w = q4_0,
 * q5_0, q8_0 against a = q8_0; w = q4_1, q5_1 against a = q8_1): llama.cpp's x86 vec_dot order, written
 * once against the lanes interface (common/km_lanes.h); every ISA variant is an instantiation of it.
 *
 * Numerics (exactly linear/<w>_<a>_ggml_ref.c): per output (m, n), eight f32 lanes acc[l] = +0; for the
 * blocks b = 0, 1, ... in order, lane[l] = the exact int32 sum of the four products at 4l..4l+3 (the
 * weight's integer times the activation quant), t = f32(fp16(w.d) * fp16(x.d)), acc[l] = fma(t,
 * (float)lane[l], acc[l]); y = kl_f8_fold(acc). The formats with a min (q4_1, q5_1) also run the scalar
 * chain summs = fma(fp16(w.m), fp16(x.s), summs) from +0 over the blocks in order (x.s = the q8_1 block's
 * d * sum of its quants) and store y = kl_f8_fold(acc) + summs. Only the order of the fmas within one
 * (m, n) matters, and every schedule below keeps it: tiles, slices and threads split columns, rows and K
 * ranges, never one lane's chain; the min chains run vectorized across 8 columns (one chain per lane).
 *
 * Schedule (the instantiating file defines these before including this header):
 *   KQ32_TT   activation rows per prefill tile (16, 8, 4 or 2)
 *   KQ32_TREG largest tile row count whose t vectors stay in registers (larger tiles store them)
 *   KQ32_RP   weight row pairs per prefill tile
 *   KQ32_R1   weight rows per decode step (M = 1): independent fma chains
 *   KQ32_PF   decode: software prefetch distance in bytes (to L2)
 *   KQ32_PFG  optional, decode over whole rows (one K slice): prefetch the step of R rows KQ32_PFG steps ahead as
 *             one contiguous range (R rows are adjacent) instead of KQ32_PF ahead along each row
 *   KQ32_PFT  prefill: prefetch distance in weight rows (to L1)
 *   KQ32_KS   blocks per K slice (accumulators are parked between slices)
 *   KQ32_NC   columns per chunk (a chunk's weights stay in L2 across activation tiles)
 *   KQ32G_NG, KQ32G_MT1, KQ32G_KB, KQ32G_MS, KQ32G_MIN_M  optional (lanes with KL_IV): batches of M >= KQ32G_MIN_M
 *             rows go to the register-blocked GEMM of linear/q32_gemm_body.h (same numerics)
 * Partition: output columns n (km_part over N); no output depends on M, tiling or (ith, nth).
 * The instantiating file defines the entry point (linear.token_major.v1 ABI) as a call of kq32_linear.
 * q4_0 has a second order (N % 8 == 0): linear/q32_cols_ggml_body.h.
 */
#ifndef KM_Q32_GGML_BODY_H
#define KM_Q32_GGML_BODY_H

#include "km_lanes.h"
#ifdef KQ32G_NG /* the instantiation also sets the prefill GEMM's schedule */
#include "q32_gemm_body.h"
#endif

#define KQ32_NACC (KQ32_RP * KQ32_TT)

/* One activation row's slice: each block prepared for the dots, its f16 scale as f32 (zero past the
 * slice, so a short group's lanes stay zero) and, for the min formats, its f16 s as f32. */
typedef struct {
    kl_q32xb xb[KQ32_KS];
    float dx[KQ32_KS + 8];
    float sx[KQ32_KS];
    int nt; /* decode weights prefetched with the non-temporal hint (one thread: +4-6% cold; two: -4-6% at the
             * FFN shapes, so L2 there), set by kq32_linear */
} kq32_xrow;

/* A decode weight prefetch: non-temporal (nt) or to L2. Memory hint only. */
KL_INLINE void kq32_pf(const uint8_t *p, int nt) {
    if (nt) kl_prefetch_nt(p);
    else kl_prefetch_l2(p);
}

/* x: the slice's first activation block (q8_0 or q8_1 by fmt). */
KL_INLINE void kq32_prep(kq32_xrow *r, const uint8_t *x, int64_t ks, const int fmt) {
    const int64_t xblk = KL_Q32_XBLK(fmt);
    for (int64_t b = 0; b < ks; b++) {
        const uint8_t *blk = x + b * xblk;
        km_half h;
        kl_q32xb_prep(&r->xb[b], (const int8_t *)(blk + KL_Q32_XQS(fmt)), fmt);
        memcpy(&h, blk, 2);
        r->dx[b] = km_fp16_to_fp32(h);
        if (KL_Q32_HASMIN(fmt)) {
            memcpy(&h, blk + 2, 2);
            r->sx[b] = km_fp16_to_fp32(h);
        }
    }
    for (int64_t b = ks; b < ((ks + 7) & ~(int64_t)7); b++) r->dx[b] = 0.0f;
}

/* Prefill: one group of n (compile-time, <= 8) blocks at block g of the slice, for RP row pairs x T
 * activation rows. The group's t values are one pair vector per (pair, row): in registers for small
 * tiles, else stored and broadcast from memory. */
KL_INLINE void kq32_group(kl_f8x2 *acc, const uint8_t *const *ra, const uint8_t *const *rb, int64_t g, int64_t wrow,
                          int64_t wblk, const int fmt, const kq32_xrow *xr, const int RP, const int T, const int n) {
    const int reg = T <= KQ32_TREG;
    for (int p = 0; p < RP; p++) /* the same blocks of the tile after next (prefetchers miss the 2 streams) */
        for (int64_t o = 0; o < n * wblk; o += 64) {
            kl_prefetch_l1(ra[p] + g * wblk + KQ32_PFT * wrow + o);
            kl_prefetch_l1(rb[p] + g * wblk + KQ32_PFT * wrow + o);
        }
    kl_f8x2 tv[KQ32_NACC];
    float tb[KQ32_NACC][16] __attribute__((aligned(64)));
    for (int p = 0; p < RP; p++) {
        const kl_f8x2 dw = kl_f8x2_f16s(ra[p] + g * wblk, rb[p] + g * wblk, wblk, n);
        for (int t = 0; t < T; t++) {
            const kl_f8x2 v = kl_f8x2_mul_f8(dw, kl_f8_loadu(xr[t].dx + g));
            if (reg) tv[p * T + t] = v;
            else kl_f8x2_storeu(tb[p * T + t], v);
        }
    }
    for (int j = 0; j < n; j++) {
        const int64_t b = g + j;
        kl_q32w2 wp[KQ32_RP];
        for (int p = 0; p < RP; p++) wp[p] = kl_q32w2_load(ra[p] + b * wblk, rb[p] + b * wblk, fmt);
        for (int t = 0; t < T; t++) {
            for (int p = 0; p < RP; p++) {
                const kl_f8x2 f = kl_q32_dot2(wp[p], &xr[t].xb[b], fmt);
                const kl_f8x2 tj = reg ? kl_f8x2_bcast(tv[p * T + t], j) : kl_f8x2_bcast_mem(tb[p * T + t], j);
                acc[p * T + t] = kl_f8x2_fma(tj, f, acc[p * T + t]);
            }
        }
    }
}

/* Prefill: one tile of rows row0 .. row0 + R - 1 (R <= 2 * RP; a missing B row repeats A and is not
 * written) x T activation rows over blocks [0, ks) of the slice. first: accumulators from +0, else
 * from park; last: fold and store y, else park them. */
KL_INLINE void kq32_tile(float *y, int64_t ystride, const uint8_t *w, int64_t wrow, int64_t wblk, const int fmt,
                         const kq32_xrow *xr, int64_t ks, int first, int last, float *park, const int RP, const int T,
                         int R) {
    kl_f8x2 acc[KQ32_NACC];
    const uint8_t *ra[KQ32_RP], *rb[KQ32_RP];
    for (int p = 0; p < RP; p++) {
        const int ia = 2 * p < R ? 2 * p : R - 1;
        const int ib = 2 * p + 1 < R ? 2 * p + 1 : ia;
        ra[p] = w + ia * wrow;
        rb[p] = w + ib * wrow;
    }
    for (int i = 0; i < RP * T; i++) acc[i] = first ? kl_f8x2_zero() : kl_f8x2_loadu(park + 16 * i);
    int64_t g = 0;
    for (; g + 8 <= ks; g += 8) kq32_group(acc, ra, rb, g, wrow, wblk, fmt, xr, RP, T, 8);
    switch (ks - g) { /* the tail, with its block count a compile-time constant */
    case 0: break;
    case 1: kq32_group(acc, ra, rb, g, wrow, wblk, fmt, xr, RP, T, 1); break;
    case 2: kq32_group(acc, ra, rb, g, wrow, wblk, fmt, xr, RP, T, 2); break;
    case 3: kq32_group(acc, ra, rb, g, wrow, wblk, fmt, xr, RP, T, 3); break;
    case 4: kq32_group(acc, ra, rb, g, wrow, wblk, fmt, xr, RP, T, 4); break;
    case 5: kq32_group(acc, ra, rb, g, wrow, wblk, fmt, xr, RP, T, 5); break;
    case 6: kq32_group(acc, ra, rb, g, wrow, wblk, fmt, xr, RP, T, 6); break;
    default: kq32_group(acc, ra, rb, g, wrow, wblk, fmt, xr, RP, T, 7); break;
    }
    if (!last) {
        for (int i = 0; i < RP * T; i++) kl_f8x2_storeu(park + 16 * i, acc[i]);
        return;
    }
    for (int p = 0; p < RP; p++) {
        for (int t = 0; t < T; t++) {
            float a, b;
            kl_f8x2_fold(acc[p * T + t], &a, &b);
            if (2 * p < R) y[t * ystride + 2 * p] = a;
            if (2 * p + 1 < R) y[t * ystride + 2 * p + 1] = b;
        }
    }
}

/* Decode: one group of n (<= 8) blocks at block g for R (compile-time, <= KQ32_R1) adjacent weight rows
 * and one activation row, one accumulator per row (R independent fma chains). The rows' block reads
 * form R interleaved forward streams, so the software prefetch goes to L2: with L1 prefetches the
 * interleaved streams ran 2-3x slower from cold memory (measured on x86). The per-block scales t go through
 * memory and come back as broadcast loads: kept in a register, each block's lane j cost a permute (and its
 * index vector) on the vector ports, which bound these GEMVs on AVX2 (q5_0 hot: ~9.6 -> ~10.8 GMAC/s per core
 * with the nibble load above, Zen 3). */
KL_INLINE void kq32_group1(kl_f8 *acc, const uint8_t *wr, int64_t wrow, int64_t g, int64_t wblk, const int fmt,
                           const kq32_xrow *xr, const int n, const int R, const uint8_t *pfl, int64_t lpb) {
    float tv[KQ32_R1][8] __attribute__((aligned(32)));
    const kl_f8 dx = kl_f8_loadu(xr->dx + g);
    if (pfl) /* the step KQ32_PFG steps ahead, one contiguous range: lpb of its lines per block */
        for (int64_t i = g * lpb; i < (g + n) * lpb; i++) kq32_pf(pfl + i * 64, xr->nt);
    for (int r = 0; r < R; r++) {
        const uint8_t *p = wr + r * wrow + g * wblk;
        kl_f8_storeu(tv[r], kl_f8_mul(kl_f8_f16s(p, wblk, n), dx));
        if (!pfl)
            for (int64_t o = 0; o < n * wblk; o += 64) kq32_pf(p + KQ32_PF + o, xr->nt);
    }
    for (int j = 0; j < n; j++) {
        const int64_t b = g + j;
        for (int r = 0; r < R; r++) {
            const kl_f8 f = kl_q32_dot(kl_q32w_load(wr + r * wrow + b * wblk, fmt), &xr->xb[b], fmt);
            acc[r] = kl_f8_fma(kl_f8_set1(tv[r][j]), f, acc[r]);
        }
    }
}

/* Decode: R consecutive weight rows at wr (row stride wrow), one K slice. */
KL_INLINE void kq32_row1(float *y, const uint8_t *wr, int64_t wrow, int64_t wblk, const int fmt, const kq32_xrow *xr,
                         int64_t ks, int first, int last, float *park, const int R) {
    kl_f8 acc[KQ32_R1];
    for (int r = 0; r < R; r++) acc[r] = first ? kl_f8_zero() : kl_f8_loadu(park + 8 * r);
#ifdef KQ32_PFG /* whole rows (one K slice): the R rows are one contiguous range, prefetched as one stream */
    const uint8_t *pfl = ks * wblk == wrow ? wr + KQ32_PFG * R * wrow : NULL;
    const int64_t lpb = (R * wrow / 64 + ks - 1) / ks;
#else
    const uint8_t *pfl = NULL;
    const int64_t lpb = 0;
#endif
    int64_t g = 0;
    for (; g + 8 <= ks; g += 8) kq32_group1(acc, wr, wrow, g, wblk, fmt, xr, 8, R, pfl, lpb);
    switch (ks - g) {
    case 0: break;
    case 1: kq32_group1(acc, wr, wrow, g, wblk, fmt, xr, 1, R, pfl, lpb); break;
    case 2: kq32_group1(acc, wr, wrow, g, wblk, fmt, xr, 2, R, pfl, lpb); break;
    case 3: kq32_group1(acc, wr, wrow, g, wblk, fmt, xr, 3, R, pfl, lpb); break;
    case 4: kq32_group1(acc, wr, wrow, g, wblk, fmt, xr, 4, R, pfl, lpb); break;
    case 5: kq32_group1(acc, wr, wrow, g, wblk, fmt, xr, 5, R, pfl, lpb); break;
    case 6: kq32_group1(acc, wr, wrow, g, wblk, fmt, xr, 6, R, pfl, lpb); break;
    default: kq32_group1(acc, wr, wrow, g, wblk, fmt, xr, 7, R, pfl, lpb); break;
    }
    for (int r = 0; r < R; r++) {
        if (last) y[r] = kl_f8_fold(acc[r]);
        else kl_f8_storeu(park + 8 * r, acc[r]);
    }
}

#if defined(KL_Q32P)
/* Decode on row pairs (lanes headers with the kl_f8p ops): rows A = 2p and B = 2p + 1 of a step share one
 * vector per block (the lanes headers choose the lane order: on AVX-512 A's and B's lanes interleave), so each
 * 512-bit dot and fma serves two rows; every lane still runs its own chain in block order. The min formats run
 * their chain summs the same way: one lane per row (the other lanes repeat it) = fma(w.m, x.s, summs) per
 * block in order. One group of n (<= 8) blocks
 * at block g for P (compile-time) pairs; ra / rb the pairs' rows at the slice's first block. */
KL_INLINE void kq32_group1p(kl_f8p *acc, kl_f8p *mins, const uint8_t *const *ra, const uint8_t *const *rb, int64_t g,
                            int64_t wblk, const int fmt, const kq32_xrow *xr, const int n, const int P) {
    kl_f8p tv[(KQ32_R1 + 1) / 2], mv[(KQ32_R1 + 1) / 2];
    const kl_f8 dx = kl_f8_loadu(xr->dx + g);
    for (int p = 0; p < P; p++) {
        const uint8_t *a = ra[p] + g * wblk, *b = rb[p] + g * wblk;
        kl_f8p dw;
        if (KL_Q32_HASMIN(fmt)) kl_f8p_f16s2(a, b, wblk, n, &dw, &mv[p]);
        else dw = kl_f8p_f16s(a, b, wblk, n);
        tv[p] = kl_f8p_mul_f8(dw, dx);
        for (int64_t o = 0; o < n * wblk; o += 64) {
            kq32_pf(a + KQ32_PF + o, xr->nt);
            kq32_pf(b + KQ32_PF + o, xr->nt);
        }
    }
    for (int j = 0; j < n; j++) {
        const int64_t b = g + j;
        for (int p = 0; p < P; p++) {
            const kl_f8p f = kl_q32p_dot(kl_q32p_load(ra[p] + b * wblk, rb[p] + b * wblk, fmt), &xr->xb[b], fmt);
            acc[p] = kl_f8p_fma(kl_f8p_bcast(tv[p], j), f, acc[p]);
            if (KL_Q32_HASMIN(fmt) && P != 2) mins[p] = kl_f8p_fma_s(kl_f8p_bcast(mv[p], j), &xr->sx[b], mins[p]);
        }
        if (KL_Q32_HASMIN(fmt) && P == 2) /* two pairs: the four rows' chains in one vector */
            mins[0] = kl_f8p_fma_s(kl_f8p_pick4(mv[0], mv[1], j), &xr->sx[b], mins[0]);
    }
}

/* Decode: R (<= KQ32_R1) consecutive weight rows at wr, one K slice, in (R + 1) / 2 pairs (an odd last row
 * pairs with itself; the copy is not written). park: 8 floats per row, mpark: the min chain, 1 per row. */
KL_INLINE void kq32_row1p(float *y, const uint8_t *wr, int64_t wrow, int64_t wblk, const int fmt, const kq32_xrow *xr,
                          int64_t ks, int first, int last, float *park, float *mpark, const int R) {
    const int P = (R + 1) / 2;
    kl_f8p acc[(KQ32_R1 + 1) / 2], mins[(KQ32_R1 + 1) / 2];
    const uint8_t *ra[(KQ32_R1 + 1) / 2], *rb[(KQ32_R1 + 1) / 2];
    for (int p = 0; p < P; p++) {
        const int ib = 2 * p + 1 < R ? 2 * p + 1 : 2 * p;
        ra[p] = wr + 2 * p * wrow;
        rb[p] = wr + ib * wrow;
        acc[p] = first ? kl_f8p_zero() : kl_f8p_join(kl_f8_loadu(park + 16 * p), kl_f8_loadu(park + 8 * ib));
        if (KL_Q32_HASMIN(fmt) && P != 2)
            mins[p] = first ? kl_f8p_zero()
                            : kl_f8p_join(kl_f8_set1(mpark[2 * p]), kl_f8_set1(mpark[ib]));
    }
    if (KL_Q32_HASMIN(fmt) && P == 2) /* lanes 4k + i: row i's chain (a missing row 3 repeats row 2's) */
        mins[0] = first ? kl_f8p_zero() : kl_f8p_load4((const float[4]){mpark[0], mpark[1], mpark[2], mpark[R > 3 ? 3 : 2]});
    int64_t g = 0;
    for (; g + 8 <= ks; g += 8) kq32_group1p(acc, mins, ra, rb, g, wblk, fmt, xr, 8, P);
    switch (ks - g) {
    case 0: break;
    case 1: kq32_group1p(acc, mins, ra, rb, g, wblk, fmt, xr, 1, P); break;
    case 2: kq32_group1p(acc, mins, ra, rb, g, wblk, fmt, xr, 2, P); break;
    case 3: kq32_group1p(acc, mins, ra, rb, g, wblk, fmt, xr, 3, P); break;
    case 4: kq32_group1p(acc, mins, ra, rb, g, wblk, fmt, xr, 4, P); break;
    case 5: kq32_group1p(acc, mins, ra, rb, g, wblk, fmt, xr, 5, P); break;
    case 6: kq32_group1p(acc, mins, ra, rb, g, wblk, fmt, xr, 6, P); break;
    default: kq32_group1p(acc, mins, ra, rb, g, wblk, fmt, xr, 7, P); break;
    }
    float m4[4];
    if (KL_Q32_HASMIN(fmt) && P == 2) kl_f8p_store4(m4, mins[0]);
    for (int p = 0; p < P; p++) {
        const int two = 2 * p + 1 < R;
        if (KL_Q32_HASMIN(fmt) && P == 2) mins[p] = kl_f8p_join(kl_f8_set1(m4[2 * p]), kl_f8_set1(m4[2 * p + 1]));
        if (last) {
            y[2 * p] = kl_f8_fold(kl_f8p_lo(acc[p]));
            if (two) y[2 * p + 1] = kl_f8_fold(kl_f8p_hi(acc[p]));
            if (KL_Q32_HASMIN(fmt)) {
                y[2 * p] = y[2 * p] + kl_f8p_first_lo(mins[p]);
                if (two) y[2 * p + 1] = y[2 * p + 1] + kl_f8p_first_hi(mins[p]);
            }
        } else {
            kl_f8_storeu(park + 16 * p, kl_f8p_lo(acc[p]));
            if (two) kl_f8_storeu(park + 16 * p + 8, kl_f8p_hi(acc[p]));
            if (KL_Q32_HASMIN(fmt)) {
                mpark[2 * p] = kl_f8p_first_lo(mins[p]);
                if (two) mpark[2 * p + 1] = kl_f8p_first_hi(mins[p]);
            }
        }
    }
}
#endif

/* The min formats: the chains summs = fma(w.m, x.s, summs) of the n (<= 8) columns of the group at column g (w at
 * the first column's slice) for T activation rows, one K slice, vectorized across 8 columns (lanes = columns: each lane
 * one chain, blocks in order). mpark holds 8 floats per (8-column group, row) between slices; the last
 * slice adds the chains to y (y = fold(acc) + summs, the fold already stored there). */
KL_INLINE void kq32_mins8(float *y, int64_t ystride, const uint8_t *w, int64_t wrow, int64_t wblk, const kq32_xrow *xr,
                          int64_t ks, int first, int last, float *mpark, int64_t g, const int n, const int T) {
    float *pk = mpark + g * T;
    kl_f8 acc[KQ32_TT];
    for (int t = 0; t < T; t++) acc[t] = first ? kl_f8_zero() : kl_f8_loadu(pk + 8 * t);
    for (int64_t b = 0; b < ks; b++) {
        const kl_f8 m = kl_f8_f16s(w + g * wrow + b * wblk + 2, wrow, n);
        for (int t = 0; t < T; t++) acc[t] = kl_f8_fma(m, kl_f8_set1(xr[t].sx[b]), acc[t]);
    }
    for (int t = 0; t < T; t++) {
        kl_f8_storeu(pk + 8 * t, acc[t]);
        if (last)
            for (int c = 0; c < n; c++) y[t * ystride + g + c] = y[t * ystride + g + c] + pk[8 * t + c];
    }
}

/* Full groups with a compile-time column count of 8 (a run-time n leaves kl_f8_f16s a loop assembling its
 * vector in memory: a store-forwarding stall per block), then the tail group. */
KL_INLINE void kq32_mins(float *y, int64_t ystride, const uint8_t *w, int64_t wrow, int64_t wblk, const kq32_xrow *xr,
                         int64_t ks, int first, int last, float *mpark, int64_t nc, const int T) {
    int64_t g = 0;
    for (; g + 8 <= nc; g += 8) kq32_mins8(y, ystride, w, wrow, wblk, xr, ks, first, last, mpark, g, 8, T);
    if (g < nc) kq32_mins8(y, ystride, w, wrow, wblk, xr, ks, first, last, mpark, g, (int)(nc - g), T);
}

/* Columns [c0, c1) for T activation rows, one K slice; park holds 16 floats per accumulator of the
 * chunk's tiles (decode: 8 per row) when the row has several slices, mpark the min chains. */
KL_INLINE void kq32_cols(float *y, int64_t N, const uint8_t *w, int64_t wrow, int64_t wblk, const int fmt,
                         const kq32_xrow *xr, int64_t ks, int first, int last, float *park, float *mpark, int64_t c0,
                         int64_t c1, const int T) {
    int64_t n = c0;
    float *pk = park;
    if (T == 1) {
#if defined(KL_Q32P)
        for (; n + KQ32_R1 <= c1; n += KQ32_R1, pk += 8 * KQ32_R1)
            kq32_row1p(y + n, w + n * wrow, wrow, wblk, fmt, xr, ks, first, last, pk, mpark + (n - c0), KQ32_R1);
        for (; n < c1; n++, pk += 8)
            kq32_row1p(y + n, w + n * wrow, wrow, wblk, fmt, xr, ks, first, last, pk, mpark + (n - c0), 1);
        return; /* the min chains ran with the rows */
#else
        for (; n + KQ32_R1 <= c1; n += KQ32_R1, pk += 8 * KQ32_R1)
            kq32_row1(y + n, w + n * wrow, wrow, wblk, fmt, xr, ks, first, last, pk, KQ32_R1);
        for (; n < c1; n++, pk += 8) kq32_row1(y + n, w + n * wrow, wrow, wblk, fmt, xr, ks, first, last, pk, 1);
#endif
    } else {
        for (; n + 2 * KQ32_RP <= c1; n += 2 * KQ32_RP, pk += 16 * KQ32_RP * T)
            kq32_tile(y + n, N, w + n * wrow, wrow, wblk, fmt, xr, ks, first, last, pk, KQ32_RP, T, 2 * KQ32_RP);
        for (; n < c1; n += 2, pk += 16 * T) {
            const int r = c1 - n >= 2 ? 2 : (int)(c1 - n);
            kq32_tile(y + n, N, w + n * wrow, wrow, wblk, fmt, xr, ks, first, last, pk, 1, T, r);
        }
    }
    if (KL_Q32_HASMIN(fmt)) kq32_mins(y + c0, N, w + c0 * wrow, wrow, wblk, xr, ks, first, last, mpark, c1 - c0, T);
}

/* The whole linear.token_major.v1 call: thread ith's columns in chunks of KQ32_NC, activation rows in
 * tiles of KQ32_TT (then 8, 4, 2, 1), K in slices of KQ32_KS blocks. */
static inline void kq32_linear(float *y, const void *w, const void *x, int64_t M, int64_t N, int64_t K, int ith,
                               int nth, const int fmt) {
    const int64_t nb = K / KM_QK8_0;
    const int64_t wblk = KL_Q32_WBLK(fmt), xblk = KL_Q32_XBLK(fmt);
    int64_t lo, hi;
    km_part(N, ith, nth, &lo, &hi);
    const int64_t wrow = nb * wblk;
    const uint8_t *wb = (const uint8_t *)w;
    const uint8_t *xb = (const uint8_t *)x;
#ifdef KQ32G_NG
    if (M >= KQ32G_MIN_M) {
        kq32g_linear(y, wb, xb, M, N, nb, lo, hi, fmt, 0, 0);
        return;
    }
#endif
    kq32_xrow xr[KQ32_TT];
    float park[16 * KQ32_NC / 2 * KQ32_TT] __attribute__((aligned(64))); /* used when nb > KQ32_KS */
    float mpark[KQ32_NC * KQ32_TT] __attribute__((aligned(64)));          /* the min formats' chains */
    for (int64_t c0 = lo; c0 < hi; c0 += KQ32_NC) {
        const int64_t c1 = hi - c0 > KQ32_NC ? c0 + KQ32_NC : hi;
        for (int64_t m0 = 0; m0 < M;) {
            const int64_t left = M - m0;
            const int T = left >= KQ32_TT ? KQ32_TT : left >= 8 ? 8 : left >= 4 ? 4 : left >= 2 ? 2 : 1;
            for (int64_t k0 = 0; k0 < nb; k0 += KQ32_KS) {
                const int64_t ks = nb - k0 > KQ32_KS ? KQ32_KS : nb - k0;
                for (int t = 0; t < T; t++) {
                    kq32_prep(&xr[t], xb + ((m0 + t) * nb + k0) * xblk, ks, fmt);
                    xr[t].nt = nth == 1;
                }
                const int first = k0 == 0, last = k0 + ks == nb;
                float *ym = y + m0 * N;
                const uint8_t *wk = wb + k0 * wblk;
                switch (T) {
#if KQ32_TT >= 16
                case 16: kq32_cols(ym, N, wk, wrow, wblk, fmt, xr, ks, first, last, park, mpark, c0, c1, 16); break;
#endif
#if KQ32_TT >= 8
                case 8: kq32_cols(ym, N, wk, wrow, wblk, fmt, xr, ks, first, last, park, mpark, c0, c1, 8); break;
#endif
                case 4: kq32_cols(ym, N, wk, wrow, wblk, fmt, xr, ks, first, last, park, mpark, c0, c1, 4); break;
                case 2: kq32_cols(ym, N, wk, wrow, wblk, fmt, xr, ks, first, last, park, mpark, c0, c1, 2); break;
                default: kq32_cols(ym, N, wk, wrow, wblk, fmt, xr, ks, first, last, park, mpark, c0, c1, 1); break;
                }
            }
            m0 += T;
        }
    }
}

#endif /* KM_Q32_GGML_BODY_H */
