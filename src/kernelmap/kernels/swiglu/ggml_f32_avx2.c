/* swiglu/ggml_f32_avx2.c — km_swiglu_f32_ggml__avx2: the AVX2 variant of contract swiglu.f32.ggml.v1.
 *
 * The contract is llama.cpp's AVX-512 SiLU (its AVX2 build uses another exp polynomial), so this
 * variant computes 8 lanes of that AVX-512 sequence (common/km_ggml_expf.h) with AVX2 + FMA: the same
 * fma/sub/mul steps, and vscalefps(j, n) as j * 2^n1 * 2^n2 with n1 = trunc(n/2), n2 = n - n1 (both
 * in [-96, 96] where it matters, so each factor is a normal power of two and the first product is exact:
 * one rounding, at the second product, as vscalefps and ldexpf round, subnormal results included);
 * lanes with |n| > 192 become +inf (n > 0) or +0 and NaN stays NaN, as in the AVX-512 code. Byte-identical
 * to km_swiglu_f32_ggml__ref for every input and every (ith, nth).
 */
#include <immintrin.h>
#include <math.h>

#define KSG_LANES 8

/* 2^k for integer k in [-126, 127], as f32 bits. */
static inline __m256 ksg_pow2(__m256i k) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k, _mm256_set1_epi32(127)), 23));
}

static inline __m256 ksg_expf8(__m256 x) {
    const __m256 r = _mm256_set1_ps(0x1.8p23f);
    const __m256 z = _mm256_fmadd_ps(x, _mm256_set1_ps(0x1.715476p+0f), r);
    const __m256 n = _mm256_sub_ps(z, r);
    const __m256 b = _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.7f7d1cp-20f),
                                      _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.62e4p-1f), x));
    const __m256 absn = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), n);
    const __m256 big = _mm256_cmp_ps(absn, _mm256_set1_ps(192.0f), _CMP_GT_OQ);
    const __m256 u = _mm256_mul_ps(b, b);
    const __m256 p = _mm256_fmadd_ps(_mm256_set1_ps(0x1.0e4020p-7f), b, _mm256_set1_ps(0x1.573e2ep-5f));
    const __m256 q = _mm256_fmadd_ps(_mm256_set1_ps(0x1.555e66p-3f), b, _mm256_set1_ps(0x1.fffdb6p-2f));
    const __m256 s = _mm256_fmadd_ps(_mm256_set1_ps(0x1.ffffecp-1f), b, _mm256_set1_ps(1.0f));
    const __m256 j = _mm256_fmadd_ps(_mm256_fmadd_ps(p, u, q), u, s);
    /* n is an integer (or NaN / beyond 192, replaced below); clamp so the exponent arithmetic stays defined */
    const __m256 nc = _mm256_min_ps(_mm256_max_ps(n, _mm256_set1_ps(-192.0f)), _mm256_set1_ps(192.0f));
    const __m256i ni = _mm256_cvttps_epi32(nc);
    const __m256i n1 = _mm256_srai_epi32(_mm256_add_epi32(ni, _mm256_srli_epi32(ni, 31)), 1); /* trunc(n / 2) */
    const __m256i n2 = _mm256_sub_epi32(ni, n1);
    __m256 res = _mm256_mul_ps(_mm256_mul_ps(j, ksg_pow2(n1)), ksg_pow2(n2));
    res = _mm256_blendv_ps(res, j, _mm256_cmp_ps(n, n, _CMP_UNORD_Q)); /* NaN n: j is NaN too, as vscalefps gives */
    if (_mm256_testz_ps(big, big)) return res;
    const __m256 nonpos = _mm256_cmp_ps(n, _mm256_setzero_ps(), _CMP_LE_OQ);
    const __m256 alt = _mm256_blendv_ps(_mm256_set1_ps(INFINITY), _mm256_setzero_ps(), nonpos);
    return _mm256_blendv_ps(res, alt, big);
}

static inline void ksg_lanes(float *y, const float *gate, const float *up) {
    const __m256 x = _mm256_loadu_ps(gate);
    const __m256 e = ksg_expf8(_mm256_sub_ps(_mm256_setzero_ps(), x));
    const __m256 silu = _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
    _mm256_storeu_ps(y, _mm256_mul_ps(silu, _mm256_loadu_ps(up)));
}

#include "ggml_body.h"

void km_swiglu_f32_ggml__avx2(float *y, const float *gate, const float *up, int64_t M, int64_t F, int ith, int nth) {
    ksg_rows(y, gate, up, M, F, ith, nth);
}
