/* linear/q6_k_ggml.h — the column and row-tile loops shared by the SIMD variants of contract
 * linear.q6_k.q8_k.ggml.v1 (linear/q6_k_q8_k_ggml_{avx2,avx512,avx512vnni}.c).
 *
 * Loop order only; the numerics are in the including file's row_tile (exactly as
 * linear/q6_k_q8_k_ggml_ref.c). Partition: output columns n (km_part over N), every thread computes
 * all M rows of its columns. The thread's columns go in chunks of about 64 KiB of weights, kept in L2
 * while every row tile passes over them (each tile's activations stay in L1); within a chunk, tiles
 * of Q6KG_ROW_TILES activation rows (largest first), then single rows for the tail of M. Every
 * y[m][n] is computed alone by one row_tile call, so it does not depend on M, tiling or (ith, nth).
 *
 * The including file defines, before including this header,
 *   static inline void row_tile(float *y, int64_t N, const km_block_q6_k *wr, const km_block_q8_k *xr,
 *                               int64_t nb, const int MT);
 * (one weight row wr against MT activation rows xr, xr + nb, ..., storing y[0], y[N], ...) and
 *   #define Q6KG_ROW_TILES(T) T(8) T(4) ...
 * listing the tile heights above 1, largest first; each is passed to row_tile as a literal constant.
 * The entry point calls q6kg_run(y, w, x, M, N, K, ith, nth).
 */
#ifndef KM_Q6_K_GGML_H
#define KM_Q6_K_GGML_H

#include "km_common.h"
#include "km_kquant.h"

/* Not inline on purpose: the entry point tail-calls it, and its machine code is then exactly that of
 * the loops when they were written in each entry point. */
static void q6kg_run(float *y, const void *w, const void *x, int64_t M, int64_t N, int64_t K, int ith, int nth) {
    const int64_t nb = K / KM_QK_K;
    int64_t n0, n1;
    km_part(N, ith, nth, &n0, &n1);
    const km_block_q8_k *xq = (const km_block_q8_k *)x;
    const km_block_q6_k *wq = (const km_block_q6_k *)w;
    int64_t cc = nb > 0 ? (64 * 1024) / (nb * (int64_t)sizeof(km_block_q6_k)) : n1 - n0; /* K = 0: one chunk */
    if (cc < 1) cc = 1;
    for (int64_t c0 = n0; c0 < n1; c0 += cc) {
        const int64_t c1 = c0 + cc < n1 ? c0 + cc : n1;
        int64_t m = 0;
#define Q6KG_TILE(MT)                                                                                          \
    for (; m + (MT) <= M; m += (MT))                                                                           \
        for (int64_t n = c0; n < c1; ++n) row_tile(y + m * N + n, N, wq + n * nb, xq + m * nb, nb, (MT));
        Q6KG_ROW_TILES(Q6KG_TILE)
#undef Q6KG_TILE
        for (; m < M; ++m)
            for (int64_t n = c0; n < c1; ++n) row_tile(y + m * N + n, N, wq + n * nb, xq + m * nb, nb, 1);
    }
}

#endif /* KM_Q6_K_GGML_H */
