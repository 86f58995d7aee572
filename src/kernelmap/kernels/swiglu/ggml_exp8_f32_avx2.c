/* swiglu/ggml_exp8_f32_avx2.c — km_swiglu_f32_ggml_exp8__avx2: the AVX2 variant of contract swiglu.f32.ggml_exp8.v1.
 *
 * The contract is the SiLU of llama.cpp's AVX2 build, whose exp is written for 8 AVX2 lanes, so this variant is
 * that sequence of steps (km_ggml_expf.h km_ggml_v_expf8 states them): the fast path fma(j, k, k) with k = 2^n
 * built in the exponent bits, and, when a lane of the 8 has |n| > 126, the two-factor path for those lanes and
 * s1 * s1 beyond 192. The row walk is swiglu/ggml_body.h with its numerics parameters set to this contract's
 * (vector columns below F - F%8, km_ggml_v_silu8 for leftover lanes). Byte-identical to
 * km_swiglu_f32_ggml_exp8__ref for every input and every (ith, nth).
 */
#include <immintrin.h>
#include <math.h>

#define KSG_LANES 8
#define KSG_VW 8
#define KSG_SILU km_ggml_v_silu8

static inline __m256 ksg_expf8(__m256 x) {
    const __m256 r = _mm256_set1_ps(0x1.8p23f);
    const __m256 z = _mm256_fmadd_ps(x, _mm256_set1_ps(0x1.715476p+0f), r);
    const __m256 n = _mm256_sub_ps(z, r);
    const __m256 b = _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.7f7d1cp-20f),
                                      _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.62e4p-1f), x));
    const __m256i e = _mm256_slli_epi32(_mm256_castps_si256(z), 23);
    const __m256 k = _mm256_castsi256_ps(_mm256_add_epi32(e, _mm256_set1_epi32(0x3F800000)));
    const __m256 absn = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), n);
    const __m256 mid = _mm256_cmp_ps(absn, _mm256_set1_ps(126.0f), _CMP_GT_OQ);
    const __m256 u = _mm256_mul_ps(b, b);
    const __m256 p = _mm256_fmadd_ps(_mm256_set1_ps(0x1.0e4020p-7f), b, _mm256_set1_ps(0x1.573e2ep-5f));
    const __m256 q = _mm256_fmadd_ps(_mm256_set1_ps(0x1.555e66p-3f), b, _mm256_set1_ps(0x1.fffdb6p-2f));
    const __m256 j = _mm256_fmadd_ps(_mm256_fmadd_ps(p, u, q), u, _mm256_mul_ps(_mm256_set1_ps(0x1.ffffecp-1f), b));
    const __m256 fast = _mm256_fmadd_ps(j, k, k);
    if (_mm256_testz_ps(mid, mid)) return fast;
    const __m256i g = _mm256_and_si256(_mm256_castps_si256(_mm256_cmp_ps(n, _mm256_setzero_ps(), _CMP_LE_OQ)),
                                       _mm256_set1_epi32((int)0x82000000u));
    const __m256 s1 = _mm256_castsi256_ps(_mm256_add_epi32(g, _mm256_set1_epi32(0x7F000000)));
    const __m256 s2 = _mm256_castsi256_ps(_mm256_sub_epi32(e, g));
    const __m256 big = _mm256_cmp_ps(absn, _mm256_set1_ps(192.0f), _CMP_GT_OQ);
    const __m256 two = _mm256_mul_ps(_mm256_fmadd_ps(s2, j, s2), s1);
    return _mm256_blendv_ps(_mm256_blendv_ps(fast, two, mid), _mm256_mul_ps(s1, s1), big);
}

static inline void ksg_lanes(float *y, const float *gate, const float *up) {
    const __m256 x = _mm256_loadu_ps(gate);
    const __m256 e = ksg_expf8(_mm256_sub_ps(_mm256_setzero_ps(), x));
    const __m256 silu = _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
    _mm256_storeu_ps(y, _mm256_mul_ps(silu, _mm256_loadu_ps(up)));
}

#include "ggml_body.h"

void km_swiglu_f32_ggml_exp8__avx2(float *y, const float *gate, const float *up, int64_t M, int64_t F, int ith,
                                   int nth) {
    ksg_rows(y, gate, up, M, F, ith, nth);
}
