/* quantize/q8_0_avx512.c — km_quantize_act_q8_0__avx512: quantize_act.q8_0.v1 with AVX-512 F/BW/VL.
 *
 * Op, layouts, numerics and partition exactly as quantize/q8_0_ref.c, bit-exact with
 * km_quantize_act_q8_0__ref: the block maximum of |x| is exact in any order; d, id and fp16(d) are
 * the same scalar operations; roundf(v) is computed exactly as t = trunc(v), plus sign(v) when
 * |v - t| >= 0.5 (v - t is exact in f32).
 */
#include <immintrin.h>
#include <math.h>

#include "km_common.h"

/* roundf() on sixteen lanes: halves away from zero, exact. */
static inline __m512 round_half_away(__m512 v) {
    __m512 t = _mm512_roundscale_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    __m512 frac = _mm512_abs_ps(_mm512_sub_ps(v, t));
    __mmask16 up = _mm512_cmp_ps_mask(frac, _mm512_set1_ps(0.5f), _CMP_GE_OQ);
    __m512 step = _mm512_castsi512_ps(_mm512_or_si512(
        _mm512_and_si512(_mm512_castps_si512(v), _mm512_set1_epi32((int)0x80000000u)),
        _mm512_castps_si512(_mm512_set1_ps(1.0f))));
    return _mm512_mask_add_ps(t, up, t, step);
}

void km_quantize_act_q8_0__avx512(void *y, const float *x, int64_t M, int64_t K, int ith, int nth) {
    int64_t lo, hi;
    km_part(M * (K / KM_QK8_0), ith, nth, &lo, &hi);
    km_block_q8_0 *yb = (km_block_q8_0 *)y;
    for (int64_t b = lo; b < hi; b++) {
        const float *xs = x + b * KM_QK8_0;
        __m512 v0 = _mm512_loadu_ps(xs);
        __m512 v1 = _mm512_loadu_ps(xs + 16);
        const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        yb[b].d = km_fp32_to_fp16(d);
        const __m512 mul = _mm512_set1_ps(id);
        __m128i q0 = _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(round_half_away(_mm512_mul_ps(v0, mul))));
        __m128i q1 = _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(round_half_away(_mm512_mul_ps(v1, mul))));
        _mm_storeu_si128((__m128i *)yb[b].qs, q0);
        _mm_storeu_si128((__m128i *)(yb[b].qs + 16), q1);
    }
}
