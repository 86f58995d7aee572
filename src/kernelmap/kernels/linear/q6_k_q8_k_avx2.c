/* linear/q6_k_q8_k_avx2.c — km_linear_q6_k_q8_k__avx2 (AVX2 + F16C): contract linear.q6_k.q8_k.f32.v1.
 *
 * Op, layouts, partition (output columns n) and numerics exactly as linear/q6_k_q8_k_ref.c; must be
 * byte-identical to km_linear_q6_k_q8_k__ref for every M, N, K (multiple of 256) and every nth.
 * The 6-bit codes u (0..63) go through vpmaddubsw (pairs <= 2*63*128, no saturation), the -32
 * offset is applied through bsums, so isum is the ref's exact int32; the float step runs 8 blocks
 * at a time (block b in lane b % 8) with the ref's per-element f32 operations, then the ref's
 * fixed reduction tree. No FMA.
 * Tiling: one weight row against up to 4 activation rows, so each unpacked q6 block is reused 4x.
 */
#include <immintrin.h>

#include "km_common.h"
#include "km_kquant.h"
#include "km_kquant_x86.h"

static inline __m128i fold256(__m256i v) {
    return _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
}

static inline __attribute__((always_inline)) void row_tile(float *y, int64_t N, const km_block_q6_k *wr,
                                                           const km_block_q8_k *xr, int64_t nb, const int MT) {
    _Alignas(32) int32_t ti[4][8][4];
    _Alignas(32) float xd[4][8];
    _Alignas(32) float wd[8];
    __m256 p[4];
    for (int r = 0; r < MT; ++r) p[r] = _mm256_setzero_ps();
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const __m256i m2 = _mm256_set1_epi8(0x03);
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
            __m256i acc[4];
            for (int r = 0; r < MT; ++r) acc[r] = _mm256_setzero_si256();
            for (int h = 0; h < 2; ++h) {
                const __m256i ql0 = _mm256_loadu_si256((const __m256i *)(wb->ql + 64 * h));
                const __m256i ql1 = _mm256_loadu_si256((const __m256i *)(wb->ql + 64 * h + 32));
                const __m256i qh = _mm256_loadu_si256((const __m256i *)(wb->qh + 32 * h));
                __m256i u[4];
                u[0] = _mm256_or_si256(_mm256_and_si256(ql0, m4), _mm256_slli_epi16(_mm256_and_si256(qh, m2), 4));
                u[1] = _mm256_or_si256(_mm256_and_si256(ql1, m4),
                                       _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2), m2), 4));
                u[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4),
                                       _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 4), m2), 4));
                u[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4),
                                       _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 6), m2), 4));
                for (int t = 0; t < 4; ++t) {
                    const char a = (char)(8 * h + 2 * t);
                    const __m128i idx = _mm_setr_epi8(a, a, a, a, a, a, a, a, (char)(a + 1), (char)(a + 1),
                                                      (char)(a + 1), (char)(a + 1), (char)(a + 1), (char)(a + 1),
                                                      (char)(a + 1), (char)(a + 1));
                    const __m256i s = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(sc8, idx));
                    for (int r = 0; r < MT; ++r) {
                        const int8_t *q8 = xr[r * nb + b].qs + 128 * h + 32 * t;
                        const __m256i d = _mm256_maddubs_epi16(u[t], _mm256_loadu_si256((const __m256i *)q8));
                        acc[r] = _mm256_add_epi32(acc[r], _mm256_madd_epi16(d, s));
                    }
                }
            }
            const __m256i sc16 = _mm256_cvtepi8_epi16(sc8);
            wd[j] = _cvtsh_ss(wb->d);
            for (int r = 0; r < MT; ++r) {
                const km_block_q8_k *xb = &xr[r * nb + b];
                const __m256i corr = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)xb->bsums), sc16);
                _mm_store_si128((__m128i *)ti[r][j], fold256(_mm256_sub_epi32(acc[r], _mm256_slli_epi32(corr, 5))));
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

void km_linear_q6_k_q8_k__avx2(float *y, const void *w, const void *x, int64_t M, int64_t N, int64_t K,
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
