/* linear/q4_k_q8_k_ggml_avx512.c — km_linear_q4_k_q8_k_ggml__avx512 (AVX-512 F/BW/VL/DQ + FMA + F16C):
 * contract linear.q4_k.q8_k.ggml.v1.
 *
 * Op, layouts, partition (output columns n) and numerics exactly as linear/q4_k_q8_k_ggml_ref.c; must be
 * byte-identical to km_linear_q4_k_q8_k_ggml__ref for every M, N, K (multiple of 256) and every nth.
 * Float part and tiling: q4_k_ggml.h (8 columns in the lanes of one ymm, one vfmadd per superblock
 * for acc and one for accm, y = acc - accm). Integer core here: one 512-bit step per 64-value chunk,
 * the chunk's 32 q4 bytes broadcast to both halves and the upper half shifted by 4, so the vector
 * holds the low-nibble sub-block then the high-nibble one in value order against a plain 64-byte q8
 * load; vpmaddubsw (no saturation: <= 2*15*128) then vpmaddwd by the sub-block scales; exact int32.
 */
#include <immintrin.h>

#include "km_common.h"
#include "km_kquant.h"

#define KM_ALWAYS_INLINE static inline __attribute__((always_inline))
#define Q4KG_BC 8 /* superblocks per chunk of q4_k_ggml.h (the core's ti rows) */

KM_ALWAYS_INLINE void q4kg_isum(const km_block_q4_k *wb, uint64_t sc, const km_block_q8_k *xb, int64_t nb,
                                const int MT, int32_t (*ti)[Q4KG_BC][8][4], int bb, int j) {
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    const __m512i shift = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(4), 1);
    const __m512i sc16 = _mm512_castsi128_si512(_mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)sc)));
    __m512i acc[8];
    for (int r = 0; r < MT; ++r) acc[r] = _mm512_setzero_si512();
    for (int c = 0; c < 4; ++c) {
        const __m512i q4 = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(wb->qs + 32 * c)));
        const __m512i wq = _mm512_and_si512(_mm512_srlv_epi16(q4, shift), m4);
        const __m512i idx = _mm512_inserti64x4(_mm512_set1_epi16((short)(2 * c)), _mm256_set1_epi16((short)(2 * c + 1)), 1);
        const __m512i s = _mm512_permutexvar_epi16(idx, sc16);
        for (int r = 0; r < MT; ++r) {
            const __m512i a = _mm512_loadu_si512((const void *)(xb[r * nb].qs + 64 * c));
            acc[r] = _mm512_add_epi32(acc[r], _mm512_madd_epi16(_mm512_maddubs_epi16(wq, a), s));
        }
    }
    for (int r = 0; r < MT; ++r) {
        const __m256i h = _mm256_add_epi32(_mm512_castsi512_si256(acc[r]), _mm512_extracti64x4_epi64(acc[r], 1));
        _mm_store_si128((__m128i *)ti[r][bb][j], _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1)));
    }
}

#include "q4_k_ggml.h"

void km_linear_q4_k_q8_k_ggml__avx512(float *y, const void *w, const void *x, int64_t M, int64_t N, int64_t K,
                                      int ith, int nth) {
    q4kg_linear(y, w, x, M, N, K, ith, nth);
}
