/* quantize/q8_0_rne_avx512.c — km_quantize_act_q8_0_rne__avx512: quantize_act.q8_0.rne.v1 with AVX-512.
 *
 * Op, layouts, numerics and partition exactly as quantize/q8_0_rne_ref.c, bit-exact with it: amax is
 * exact in any order, d and id are the same scalar operations, and the conversion with the default
 * rounding (nearest even) is rint(). Values are within [-127, 127], so the saturating narrow is exact.
 */
#include <immintrin.h>

#include "km_common.h"

void km_quantize_act_q8_0_rne__avx512(void *y, const float *x, int64_t M, int64_t K, int ith, int nth) {
    int64_t lo, hi;
    km_part(M * (K / KM_QK8_0), ith, nth, &lo, &hi);
    km_block_q8_0 *yb = (km_block_q8_0 *)y;
    for (int64_t b = lo; b < hi; b++) {
        const float *xs = x + b * KM_QK8_0;
        __m512 v0 = _mm512_loadu_ps(xs);
        __m512 v1 = _mm512_loadu_ps(xs + 16);
        const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
        const float d = amax / 127.0f;
        const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
        yb[b].d = km_fp32_to_fp16(d);
        const __m512 mul = _mm512_set1_ps(id);
        __m512i i0 = _mm512_cvt_roundps_epi32(_mm512_mul_ps(v0, mul), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        __m512i i1 = _mm512_cvt_roundps_epi32(_mm512_mul_ps(v1, mul), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        _mm_storeu_si128((__m128i *)yb[b].qs, _mm512_cvtsepi32_epi8(i0));
        _mm_storeu_si128((__m128i *)(yb[b].qs + 16), _mm512_cvtsepi32_epi8(i1));
    }
}
