/* linear/q4_k_ggml.h — the shared SIMD body of contract linear.q4_k.q8_k.ggml.v1 (avx2, avx512,
 * avx512vnni variants of map linear_q4_k_q8_k_ggml).
 *
 * Numerics exactly as linear/q4_k_q8_k_ggml_ref.c states: per (m, n) and superblock b in increasing
 * order, isum and imin exact int32, acc = fma((float)isum, f32(fp16(w.d) * x.d), acc) and
 * accm = fma((float)imin, f32(fp16(w.dmin) * x.d), accm) from +0, y = acc - accm.
 * Vector layout: lane j of an 8-lane ymm accumulator is output column n0 + j, so the float steps are
 * plain lane-wise vfmadd (one per superblock, in block order) and no cross-lane float op exists; each
 * y[m][n] therefore sees exactly the ref's sequence, whatever the tiling, M or (ith, nth).
 * Tiling: 8 weight rows (columns; fewer at the slice end, unused lanes are zero and never stored)
 * against 8 activation rows (then 4, then 1 for the tail of M); each unpacked q4 block is reused
 * for all rows of the tile. Superblocks go in chunks of 8 whose isums are computed column by column
 * (each weight row is read 1152 B at a time, sequentially: interleaving the 8 rows in smaller pieces
 * halved cold decode speed at K = 2048) before the chunk's imin and float steps.
 * Partition: output columns n (km_part over N); groups of 8 start at the thread's own n0.
 *
 * The including file defines, before including this header, the integer core
 *   KM_ALWAYS_INLINE void q4kg_isum(const km_block_q4_k *wb, uint64_t sc, const km_block_q8_k *xb,
 *                                   int64_t nb, const int MT, int32_t (*ti)[Q4KG_BC][8][4], int bb, int j);
 * which stores, for each r < MT, four int32 whose exact sum is isum(wb, xb + r * nb) into ti[r][bb][j]
 * (sc: the 8 scales packed one per byte, as km_q4k_scales64 returns them). imin is done here, for
 * 8 columns at once from their mins and the activation's bsums pair sums.
 */
#ifndef KM_Q4_K_GGML_H
#define KM_Q4_K_GGML_H

#include <immintrin.h>

#include "km_common.h"
#include "km_kquant.h"

#ifndef KM_ALWAYS_INLINE
#define KM_ALWAYS_INLINE static inline __attribute__((always_inline))
#endif

#ifndef Q4KG_BC
#define Q4KG_BC 8 /* superblocks per chunk: a weight row is read 8 blocks (1152 B) at a time, sequentially */
#endif

/* Output tile y[r][j] (row stride N) for r < MT, j < nc: weight rows w[j] (nb blocks each), activation
 * rows x[r] (nb blocks each). MT is a compile-time 8, 4 or 1; nc is 8 or the slice's last short group.
 * Superblocks go in chunks of Q4KG_BC: first the isum of every (column, block, row) of the chunk
 * (column by column, so each weight row streams sequentially), then per block in increasing order
 * imin of the 8 columns at once (mins x pair sums of bsums, vpmaddwd, exact) and the float steps. */
KM_ALWAYS_INLINE void q4kg_tile(float *y, int64_t N, const km_block_q4_k *w, const km_block_q8_k *x, int64_t nb,
                                const int nc, const int MT) {
    _Alignas(32) int32_t ti[8][Q4KG_BC][8][4];
    _Alignas(32) uint64_t mins[Q4KG_BC][8]; /* byte k of mins[bb][j] = mn[k] of column j's block */
    _Alignas(16) km_half hd[Q4KG_BC][8];
    _Alignas(16) km_half hm[Q4KG_BC][8];
    __m256 acc[8], accm[8];
    for (int r = 0; r < MT; ++r) {
        acc[r] = _mm256_setzero_ps();
        accm[r] = _mm256_setzero_ps();
    }
    for (int bb = 0; bb < Q4KG_BC; ++bb) { /* absent columns: zero terms, lanes never stored */
        for (int j = nc; j < 8; ++j) {
            hd[bb][j] = hm[bb][j] = 0;
            mins[bb][j] = 0;
            for (int r = 0; r < MT; ++r) memset(ti[r][bb][j], 0, sizeof ti[r][bb][j]);
        }
    }
    for (int64_t b0 = 0; b0 < nb; b0 += Q4KG_BC) {
        const int bc = (nb - b0) < Q4KG_BC ? (int)(nb - b0) : Q4KG_BC;
        for (int j = 0; j < nc; ++j) {
            for (int bb = 0; bb < bc; ++bb) {
                const km_block_q4_k *wb = &w[j * nb + b0 + bb];
                uint64_t sc;
                km_q4k_scales64(wb->scales, &sc, &mins[bb][j]);
                q4kg_isum(wb, sc, x + b0 + bb, nb, MT, ti, bb, j);
                hd[bb][j] = wb->d;
                hm[bb][j] = wb->dmin;
            }
        }
        for (int bb = 0; bb < bc; ++bb) {
            const int64_t b = b0 + bb;
            const __m256 vwd = _mm256_cvtph_ps(_mm_load_si128((const __m128i *)hd[bb]));
            const __m256 vwm = _mm256_cvtph_ps(_mm_load_si128((const __m128i *)hm[bb]));
            /* int16 mins, columns (0,1), (2,3), (4,5), (6,7): 8 per column, in 128-bit halves */
            const __m256i m01 = _mm256_cvtepu8_epi16(_mm_load_si128((const __m128i *)&mins[bb][0]));
            const __m256i m23 = _mm256_cvtepu8_epi16(_mm_load_si128((const __m128i *)&mins[bb][2]));
            const __m256i m45 = _mm256_cvtepu8_epi16(_mm_load_si128((const __m128i *)&mins[bb][4]));
            const __m256i m67 = _mm256_cvtepu8_epi16(_mm_load_si128((const __m128i *)&mins[bb][6]));
            for (int r = 0; r < MT; ++r) {
                const km_block_q8_k *xb = &x[r * nb + b];
                /* pair sums bsums[2k] + bsums[2k+1], k < 8 (|.| <= 32*128: exact in int16), both halves */
                const __m256i bs = _mm256_broadcastsi128_si256(
                    _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)xb->bsums),
                                   _mm_loadu_si128((const __m128i *)(xb->bsums + 8))));
                /* 4 int32 per column whose sum is imin; folded to lane j = column j like km_kq_fold8 */
                const __m256i h01 = _mm256_hadd_epi32(_mm256_madd_epi16(m01, bs), _mm256_madd_epi16(m23, bs));
                const __m256i h45 = _mm256_hadd_epi32(_mm256_madd_epi16(m45, bs), _mm256_madd_epi16(m67, bs));
                const __m256i imin = _mm256_permutevar8x32_epi32(_mm256_hadd_epi32(h01, h45),
                                                                 _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
                const __m256 xd = _mm256_set1_ps(xb->d);
                const __m256 fd = _mm256_mul_ps(vwd, xd);
                const __m256 fm = _mm256_mul_ps(vwm, xd);
                acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(km_kq_fold8(ti[r][bb])), fd, acc[r]);
                accm[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(imin), fm, accm[r]);
            }
        }
    }
    for (int r = 0; r < MT; ++r) {
        const __m256 v = _mm256_sub_ps(acc[r], accm[r]);
        if (nc == 8) {
            _mm256_storeu_ps(y + r * N, v);
        } else {
            _Alignas(32) float t[8];
            _mm256_store_ps(t, v);
            memcpy(y + r * N, t, sizeof(float) * (size_t)nc);
        }
    }
}

/* The whole kernel body: thread ith's columns in groups of 8, rows in tiles of 4 then singles. */
KM_ALWAYS_INLINE void q4kg_linear(float *y, const void *w, const void *x, int64_t M, int64_t N, int64_t K, int ith,
                                  int nth) {
    const int64_t nb = K / KM_QK_K;
    int64_t n0, n1;
    km_part(N, ith, nth, &n0, &n1);
    const km_block_q8_k *xq = (const km_block_q8_k *)x;
    for (int64_t n = n0; n < n1; n += 8) {
        const km_block_q4_k *wr = (const km_block_q4_k *)w + n * nb;
        float *yc = y + n;
        if (n + 8 <= n1) {
            int64_t m = 0;
            for (; m + 8 <= M; m += 8) q4kg_tile(yc + m * N, N, wr, xq + m * nb, nb, 8, 8);
            for (; m + 4 <= M; m += 4) q4kg_tile(yc + m * N, N, wr, xq + m * nb, nb, 8, 4);
            for (; m < M; ++m) q4kg_tile(yc + m * N, N, wr, xq + m * nb, nb, 8, 1);
        } else {
            const int nc = (int)(n1 - n);
            int64_t m = 0;
            for (; m + 8 <= M; m += 8) q4kg_tile(yc + m * N, N, wr, xq + m * nb, nb, nc, 8);
            for (; m + 4 <= M; m += 4) q4kg_tile(yc + m * N, N, wr, xq + m * nb, nb, nc, 4);
            for (; m < M; ++m) q4kg_tile(yc + m * N, N, wr, xq + m * nb, nb, nc, 1);
        }
    }
}

#endif /* KM_Q4_K_GGML_H */
