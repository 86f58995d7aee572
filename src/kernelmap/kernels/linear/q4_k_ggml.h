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
 * against 4 activation rows (1 for the M % 4 tail); each unpacked q4 block is reused for the 4 rows.
 * Partition: output columns n (km_part over N); groups of 8 start at the thread's own n0.
 *
 * The including file defines, before including this header, the integer core
 *   KM_ALWAYS_INLINE void q4kg_isum(const km_block_q4_k *wb, uint64_t sc, const km_block_q8_k *xb,
 *                                   int64_t nb, const int MT, int32_t (*ti)[8][4], int j);
 * which stores, for each r < MT, four int32 whose exact sum is isum(wb, xb + r * nb) into ti[r][j]
 * (sc: the 8 scales packed one per byte, as km_q4k_scales64 returns them). imin is done here.
 */
#ifndef KM_Q4_K_GGML_H
#define KM_Q4_K_GGML_H

#include <immintrin.h>

#include "km_common.h"
#include "km_kquant.h"

#ifndef KM_ALWAYS_INLINE
#define KM_ALWAYS_INLINE static inline __attribute__((always_inline))
#endif

/* 256-bit int32 -> 4 int32 with the same total (exact). */
static inline __m128i q4kg_half_fold(__m256i v) {
    return _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
}

/* Output tile y[r][j] (row stride N) for r < MT, j < nc: weight rows w[j] (nb blocks each), activation
 * rows x[r] (nb blocks each). MT is a compile-time 4 or 1; nc is 8 or the slice's last short group. */
KM_ALWAYS_INLINE void q4kg_tile(float *y, int64_t N, const km_block_q4_k *w, const km_block_q8_k *x, int64_t nb,
                                const int nc, const int MT) {
    _Alignas(32) int32_t ti[4][8][4];
    _Alignas(32) int32_t tm[4][8][4];
    _Alignas(32) float wd[8];
    _Alignas(32) float wm[8];
    __m256 acc[4], accm[4];
    for (int r = 0; r < MT; ++r) {
        acc[r] = _mm256_setzero_ps();
        accm[r] = _mm256_setzero_ps();
    }
    for (int j = nc; j < 8; ++j) { /* absent columns: zero terms, lanes never stored */
        wd[j] = wm[j] = 0.0f;
        for (int r = 0; r < MT; ++r) {
            memset(ti[r][j], 0, sizeof ti[r][j]);
            memset(tm[r][j], 0, sizeof tm[r][j]);
        }
    }
    for (int64_t b = 0; b < nb; ++b) {
        for (int j = 0; j < nc; ++j) {
            const km_block_q4_k *wb = &w[j * nb + b];
            uint64_t sc, mn;
            km_q4k_scales64(wb->scales, &sc, &mn);
            q4kg_isum(wb, sc, x + b, nb, MT, ti, j);
            /* imin: lane k of madd = mn[k] * (bsums[2k] + bsums[2k+1]), exact */
            const __m128i mn16 = _mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)mn));
            const __m256i mins = _mm256_set_m128i(_mm_unpackhi_epi16(mn16, mn16), _mm_unpacklo_epi16(mn16, mn16));
            for (int r = 0; r < MT; ++r) {
                const __m256i bs = _mm256_loadu_si256((const __m256i *)x[r * nb + b].bsums);
                _mm_store_si128((__m128i *)tm[r][j], q4kg_half_fold(_mm256_madd_epi16(bs, mins)));
            }
            wd[j] = _cvtsh_ss(wb->d);
            wm[j] = _cvtsh_ss(wb->dmin);
        }
        const __m256 vwd = _mm256_load_ps(wd);
        const __m256 vwm = _mm256_load_ps(wm);
        for (int r = 0; r < MT; ++r) {
            const __m256 xd = _mm256_set1_ps(x[r * nb + b].d);
            const __m256 fd = _mm256_mul_ps(vwd, xd);
            const __m256 fm = _mm256_mul_ps(vwm, xd);
            acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(km_kq_fold8(ti[r])), fd, acc[r]);
            accm[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(km_kq_fold8(tm[r])), fm, accm[r]);
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
            for (; m + 4 <= M; m += 4) q4kg_tile(yc + m * N, N, wr, xq + m * nb, nb, 8, 4);
            for (; m < M; ++m) q4kg_tile(yc + m * N, N, wr, xq + m * nb, nb, 8, 1);
        } else {
            const int nc = (int)(n1 - n);
            int64_t m = 0;
            for (; m + 4 <= M; m += 4) q4kg_tile(yc + m * N, N, wr, xq + m * nb, nb, nc, 4);
            for (; m < M; ++m) q4kg_tile(yc + m * N, N, wr, xq + m * nb, nb, nc, 1);
        }
    }
}

#endif /* KM_Q4_K_GGML_H */
