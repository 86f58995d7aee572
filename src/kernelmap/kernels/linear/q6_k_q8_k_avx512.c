/* linear/q6_k_q8_k_avx512.c — km_linear_q6_k_q8_k__avx512 (AVX-512 F/BW/VL/DQ + F16C): contract
 * linear.q6_k.q8_k.f32.v1.
 *
 * Op, layouts, partition (output columns n) and numerics exactly as linear/q6_k_q8_k_ref.c; must be
 * byte-identical to km_linear_q6_k_q8_k__ref (and so to the avx2 variant) for every M, N, K
 * (multiple of 256) and every nth. One 512-bit step covers 64 consecutive values: ql's 64 bytes
 * of a half give the low nibbles, the half's 32 qh bytes are broadcast and shifted per 256-bit
 * half (0/2 for the low-nibble values, 4/6 for the high-nibble ones). The -32 offset goes through
 * bsums, so isum is the ref's exact int32; the float step runs 8 blocks at a time (block b in
 * lane b % 8) with the ref's per-element f32 operations, then its fixed tree. No FMA.
 * Tiling: one weight row against up to 4 activation rows.
 */
#include <immintrin.h>

#include "km_common.h"
#include "km_kquant.h"
#include "km_kquant_x86.h"

static inline __m128i fold512(__m512i v) {
    const __m256i h = _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
    return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}

static inline __attribute__((always_inline)) void row_tile(float *y, int64_t N, const km_block_q6_k *wr,
                                                           const km_block_q8_k *xr, int64_t nb, const int MT) {
    _Alignas(32) int32_t ti[4][8][4];
    _Alignas(32) float xd[4][8];
    _Alignas(32) float wd[8];
    __m256 p[4];
    for (int r = 0; r < MT; ++r) p[r] = _mm256_setzero_ps();
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    const __m512i m2 = _mm512_set1_epi8(0x03);
    const __m512i sh01 = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1);
    const __m512i sh23 = _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(6), 1);
    /* scale index of int16 lane l of the vector covering values 64g..64g+63 is 4g + l/8 */
    const __m512i lane_sub = _mm512_set_epi16(3, 3, 3, 3, 3, 3, 3, 3, 2, 2, 2, 2, 2, 2, 2, 2,
                                              1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
    for (int64_t b0 = 0; b0 < nb; b0 += 8) {
        const int cnt = (nb - b0) < 8 ? (int)(nb - b0) : 8;
        for (int j = cnt; j < 8; ++j) { /* absent blocks of a short last group: zero terms */
            wd[j] = 0.0f;
            for (int r = 0; r < MT; ++r) {
                xd[r][j] = 0.0f;
                memset(ti[r][j], 0, sizeof ti[r][j]);
            }
        }
        for (int j = 0; j < cnt; ++j) {
            const int64_t b = b0 + j;
            const km_block_q6_k *wb = &wr[b];
            const __m128i sc8 = _mm_loadu_si128((const __m128i *)wb->scales);
            const __m256i sc16 = _mm256_cvtepi8_epi16(sc8);
            const __m512i sc16w = _mm512_castsi256_si512(sc16);
            __m512i acc[4];
            for (int r = 0; r < MT; ++r) acc[r] = _mm512_setzero_si512();
            for (int h = 0; h < 2; ++h) {
                const __m512i ql = _mm512_loadu_si512((const void *)(wb->ql + 64 * h));
                const __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(wb->qh + 32 * h)));
                __m512i u[2];
                u[0] = _mm512_or_si512(_mm512_and_si512(ql, m4),
                                       _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi16(qh, sh01), m2), 4));
                u[1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), m4),
                                       _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi16(qh, sh23), m2), 4));
                for (int g = 0; g < 2; ++g) {
                    const int grp = 2 * h + g; /* values 64*grp .. 64*grp+63 */
                    const __m512i idx = _mm512_add_epi16(lane_sub, _mm512_set1_epi16((short)(4 * grp)));
                    const __m512i s = _mm512_permutexvar_epi16(idx, sc16w);
                    for (int r = 0; r < MT; ++r) {
                        const __m512i a = _mm512_loadu_si512((const void *)(xr[r * nb + b].qs + 64 * grp));
                        acc[r] = _mm512_add_epi32(acc[r], _mm512_madd_epi16(_mm512_maddubs_epi16(u[g], a), s));
                    }
                }
            }
            wd[j] = _cvtsh_ss(wb->d);
            for (int r = 0; r < MT; ++r) {
                const km_block_q8_k *xb = &xr[r * nb + b];
                const __m256i corr = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)xb->bsums), sc16);
                const __m512i tot = _mm512_sub_epi32(acc[r], _mm512_castsi256_si512(_mm256_slli_epi32(corr, 5)));
                _mm_store_si128((__m128i *)ti[r][j], fold512(tot));
                xd[r][j] = xb->d;
            }
        }
        const __m256 vwd = _mm256_load_ps(wd);
        for (int r = 0; r < MT; ++r) {
            const __m256 fd = _mm256_mul_ps(vwd, _mm256_load_ps(xd[r]));
            p[r] = _mm256_add_ps(p[r], _mm256_mul_ps(fd, _mm256_cvtepi32_ps(km_kq_fold8(ti[r]))));
        }
    }
    for (int r = 0; r < MT; ++r) y[r * N] = km_kq_reduce8_ps(p[r]);
}

void km_linear_q6_k_q8_k__avx512(float *y, const void *w, const void *x, int64_t M, int64_t N, int64_t K,
                                 int ith, int nth) {
    const int64_t nb = K / KM_QK_K;
    int64_t n0, n1;
    km_part(N, ith, nth, &n0, &n1);
    const km_block_q8_k *xq = (const km_block_q8_k *)x;
    for (int64_t n = n0; n < n1; ++n) {
        const km_block_q6_k *wr = (const km_block_q6_k *)w + n * nb;
        int64_t m = 0;
        for (; m + 4 <= M; m += 4) row_tile(y + m * N + n, N, wr, xq + m * nb, nb, 4);
        for (; m < M; ++m) row_tile(y + m * N + n, N, wr, xq + m * nb, nb, 1);
    }
}
