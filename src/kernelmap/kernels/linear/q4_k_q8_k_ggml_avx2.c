/* linear/q4_k_q8_k_ggml_avx2.c — km_linear_q4_k_q8_k_ggml__avx2 (AVX2 + FMA + F16C): contract
 * linear.q4_k.q8_k.ggml.v1.
 *
 * Op, layouts, partition (output columns n) and numerics exactly as linear/q4_k_q8_k_ggml_ref.c; must be
 * byte-identical to km_linear_q4_k_q8_k_ggml__ref for every M, N, K (multiple of 256) and every nth.
 * Float part and tiling: q4_k_ggml.h (8 columns in the lanes of one ymm, one vfmadd per superblock
 * for acc and one for accm, y = acc - accm). Integer core here: per 64-value chunk, vpmaddubsw of the
 * low / high nibbles against the q8 bytes (pairs <= 2*15*128, no saturation), then vpmaddwd by the
 * sub-block scale: isum is exact int32.
 */
#include <immintrin.h>

#include "km_common.h"
#include "km_kquant.h"

#define KM_ALWAYS_INLINE static inline __attribute__((always_inline))
#define Q4KG_BC 8 /* superblocks per chunk of q4_k_ggml.h (the core's ti rows) */

KM_ALWAYS_INLINE void q4kg_isum(const km_block_q4_k *wb, uint64_t sc, const km_block_q8_k *xb, int64_t nb,
                                const int MT, int32_t (*ti)[Q4KG_BC][8][4], int bb, int j) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    /* int16 scales 0..7 in both 128-bit halves; int16 lane k is bytes 2k, 2k+1 */
    const __m256i sc16 = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)sc)));
    __m256i acc[8];
    for (int r = 0; r < MT; ++r) acc[r] = _mm256_setzero_si256();
    for (int c = 0; c < 4; ++c) {
        const __m256i q4 = _mm256_loadu_si256((const __m256i *)(wb->qs + 32 * c));
        const __m256i lo = _mm256_and_si256(q4, m4);
        const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q4, 4), m4);
        const __m256i slo = _mm256_shuffle_epi8(sc16, _mm256_set1_epi16((short)(0x0100 + 0x0404 * c)));
        const __m256i shi = _mm256_shuffle_epi8(sc16, _mm256_set1_epi16((short)(0x0302 + 0x0404 * c)));
        for (int r = 0; r < MT; ++r) {
            const int8_t *q8 = xb[r * nb].qs + 64 * c;
            const __m256i a = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, _mm256_loadu_si256((const __m256i *)q8)), slo);
            const __m256i h = _mm256_madd_epi16(
                _mm256_maddubs_epi16(hi, _mm256_loadu_si256((const __m256i *)(q8 + 32))), shi);
            acc[r] = _mm256_add_epi32(acc[r], _mm256_add_epi32(a, h));
        }
    }
    for (int r = 0; r < MT; ++r) {
        _mm_store_si128((__m128i *)ti[r][bb][j],
                        _mm_add_epi32(_mm256_castsi256_si128(acc[r]), _mm256_extracti128_si256(acc[r], 1)));
    }
}

#include "q4_k_ggml.h"

void km_linear_q4_k_q8_k_ggml__avx2(float *y, const void *w, const void *x, int64_t M, int64_t N, int64_t K,
                                    int ith, int nth) {
    q4kg_linear(y, w, x, M, N, K, ith, nth);
}
