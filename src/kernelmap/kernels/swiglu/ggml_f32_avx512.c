/* swiglu/ggml_f32_avx512.c — km_swiglu_f32_ggml__avx512: the AVX-512 variant of contract swiglu.f32.ggml.v1.
 *
 * The row walk of swiglu/ggml_body.h with 16 lanes of the vector SiLU written with the same instruction
 * sequence the contract names (common/km_ggml_expf.h): z = fma(x, log2e, 0x1.8p23), n = z - 0x1.8p23,
 * b = fnmadd(n, c1, fnmadd(n, c0, x)), the degree-5 fma polynomial j, vscalefps(j, n), then lanes with
 * |n| > 192 replaced by +inf (n > 0) or +0; silu = x / (1 + that of 0 - x); times up. Byte-identical to
 * km_swiglu_f32_ggml__ref for every input and every (ith, nth).
 */
#include <immintrin.h>
#include <math.h>

#define KSG_LANES 16

static inline __m512 ksg_expf16(__m512 x) {
    const __m512 r = _mm512_set1_ps(0x1.8p23f);
    const __m512 z = _mm512_fmadd_ps(x, _mm512_set1_ps(0x1.715476p+0f), r);
    const __m512 n = _mm512_sub_ps(z, r);
    const __m512 b = _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.7f7d1cp-20f),
                                      _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.62e4p-1f), x));
    const __mmask16 big = _mm512_cmp_ps_mask(_mm512_abs_ps(n), _mm512_set1_ps(192.0f), _CMP_GT_OQ);
    const __m512 u = _mm512_mul_ps(b, b);
    const __m512 p = _mm512_fmadd_ps(_mm512_set1_ps(0x1.0e4020p-7f), b, _mm512_set1_ps(0x1.573e2ep-5f));
    const __m512 q = _mm512_fmadd_ps(_mm512_set1_ps(0x1.555e66p-3f), b, _mm512_set1_ps(0x1.fffdb6p-2f));
    const __m512 s = _mm512_fmadd_ps(_mm512_set1_ps(0x1.ffffecp-1f), b, _mm512_set1_ps(1.0f));
    const __m512 j = _mm512_fmadd_ps(_mm512_fmadd_ps(p, u, q), u, s);
    const __m512 res = _mm512_scalef_ps(j, n);
    if (!big) return res;
    const __mmask16 nonpos = _mm512_cmp_ps_mask(n, _mm512_setzero_ps(), _CMP_LE_OQ);
    const __m512 alt = _mm512_mask_blend_ps(nonpos, _mm512_set1_ps(INFINITY), _mm512_setzero_ps());
    return _mm512_mask_blend_ps(big, res, alt);
}

static inline void ksg_lanes(float *y, const float *gate, const float *up) {
    const __m512 x = _mm512_loadu_ps(gate);
    const __m512 e = ksg_expf16(_mm512_sub_ps(_mm512_setzero_ps(), x));
    const __m512 silu = _mm512_div_ps(x, _mm512_add_ps(_mm512_set1_ps(1.0f), e));
    _mm512_storeu_ps(y, _mm512_mul_ps(silu, _mm512_loadu_ps(up)));
}

#include "ggml_body.h"

void km_swiglu_f32_ggml__avx512(float *y, const float *gate, const float *up, int64_t M, int64_t F, int ith, int nth) {
    ksg_rows(y, gate, up, M, F, ith, nth);
}
