/* quantize/q8_0_avx2.c — km_quantize_act_q8_0__avx2: quantize_act.q8_0.v1 with AVX2.
 *
 * Op, layouts, numerics and partition exactly as quantize/q8_0_ref.c, bit-exact with
 * km_quantize_act_q8_0__ref: the block maximum of |x| is exact in any order; d, id and fp16(d) are
 * the same scalar operations; roundf(v) is computed exactly as t = trunc(v), plus sign(v) when
 * |v - t| >= 0.5 (v - t is exact in f32).
 */
#include <immintrin.h>
#include <math.h>

#include "km_common.h"

/* roundf() on eight lanes: halves away from zero, exact. */
static inline __m256 round_half_away(__m256 v) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 t = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    __m256 frac = _mm256_andnot_ps(sign, _mm256_sub_ps(v, t));
    __m256 step = _mm256_or_ps(_mm256_and_ps(v, sign), _mm256_set1_ps(1.0f));
    __m256 up = _mm256_cmp_ps(frac, _mm256_set1_ps(0.5f), _CMP_GE_OQ);
    return _mm256_add_ps(t, _mm256_and_ps(up, step));
}

void km_quantize_act_q8_0__avx2(void *y, const float *x, int64_t M, int64_t K, int ith, int nth) {
    int64_t lo, hi;
    km_part(M * (K / KM_QK8_0), ith, nth, &lo, &hi);
    km_block_q8_0 *yb = (km_block_q8_0 *)y;
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (int64_t b = lo; b < hi; b++) {
        const float *xs = x + b * KM_QK8_0;
        __m256 v[4];
        for (int k = 0; k < 4; k++) v[k] = _mm256_loadu_ps(xs + 8 * k);
        __m256 mx = _mm256_max_ps(_mm256_max_ps(_mm256_andnot_ps(sign, v[0]), _mm256_andnot_ps(sign, v[1])),
                                  _mm256_max_ps(_mm256_andnot_ps(sign, v[2]), _mm256_andnot_ps(sign, v[3])));
        __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_shuffle_ps(m4, m4, 1));
        const float amax = _mm_cvtss_f32(m4);
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        yb[b].d = km_fp32_to_fp16(d);
        const __m256 mul = _mm256_set1_ps(id);
        __m256i q[4];
        for (int k = 0; k < 4; k++) q[k] = _mm256_cvtps_epi32(round_half_away(_mm256_mul_ps(v[k], mul)));
        __m256i p16a = _mm256_packs_epi32(q[0], q[1]);
        __m256i p16b = _mm256_packs_epi32(q[2], q[3]);
        __m256i p8 = _mm256_packs_epi16(p16a, p16b);
        p8 = _mm256_permutevar8x32_epi32(p8, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        _mm256_storeu_si256((__m256i *)yb[b].qs, p8);
    }
}
