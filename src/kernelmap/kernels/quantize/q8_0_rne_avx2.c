/* quantize/q8_0_rne_avx2.c — km_quantize_act_q8_0_rne__avx2: quantize_act.q8_0.rne.v1 with AVX2.
 *
 * Op, layouts, numerics and partition exactly as quantize/q8_0_rne_ref.c, bit-exact with it: amax is
 * exact in any order, d and id are the same scalar operations, the products are the same single f32
 * multiplies, and _mm256_round_ps(_MM_FROUND_TO_NEAREST_INT) is rint() in the default mode.
 */
#include <immintrin.h>

#include "km_common.h"

void km_quantize_act_q8_0_rne__avx2(void *y, const float *x, int64_t M, int64_t K, int ith, int nth) {
    int64_t lo, hi;
    km_part(M * (K / KM_QK8_0), ith, nth, &lo, &hi);
    km_block_q8_0 *yb = (km_block_q8_0 *)y;
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (int64_t b = lo; b < hi; b++) {
        const float *xs = x + b * KM_QK8_0;
        __m256 v[4];
        __m256 m = _mm256_setzero_ps();
        for (int j = 0; j < 4; j++) {
            v[j] = _mm256_loadu_ps(xs + 8 * j);
            m = _mm256_max_ps(m, _mm256_andnot_ps(sign, v[j]));
        }
        __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
        const float amax = _mm_cvtss_f32(m4);
        const float d = amax / 127.0f;
        const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
        yb[b].d = km_fp32_to_fp16(d);
        const __m256 mul = _mm256_set1_ps(id);
        __m256i i[4];
        for (int j = 0; j < 4; j++)
            i[j] = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v[j], mul),
                                                      _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        /* pack 32 x i32 -> 32 x i8 in order: packs interleave 128-bit lanes, a permute restores it */
        __m256i p01 = _mm256_packs_epi32(i[0], i[1]);
        __m256i p23 = _mm256_packs_epi32(i[2], i[3]);
        __m256i p = _mm256_packs_epi16(p01, p23);
        p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        _mm256_storeu_si256((__m256i *)yb[b].qs, p);
    }
}
