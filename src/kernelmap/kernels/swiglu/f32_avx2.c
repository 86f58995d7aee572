/* swiglu/f32_avx2.c — km_swiglu_f32__avx2: (AVX2 + FMA) within tolerance of ref under contract swiglu.f32.v1.
 *
 * Op: y = silu(gate) * up elementwise over f32 [M, F] (row-major; y may alias gate or up), with
 * silu(x) = x / (1 + exp(-x)) in f32 (llama.cpp's scalar ggml_silu_f32 times up). ref uses libm
 * expf. SIMD variants use the vector exp below with IEEE division, so they are within the map's
 * tolerance of ref (rtol 1e-6 plus a tiny atol) and byte-identical with each other.
 * Vector exp (identical op sequence in avx2 and avx512, FMA used as written): x = min(89, x);
 * lanes with x < -86.5 give +0.0; x = max(-86.5, x); n = nearest-even(x * 1.44269504f);
 * r = fma(-n, 0.693359375f, x); r = fma(-n, -2.12194440e-4f, r); p = Horner-FMA polynomial
 * (1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1,
 * 5.0000001201e-1) in r; e = (fma(p, r*r, r) + 1) * 2^(n-1) * 2. Within 2 ulp of expf on the range used.
 * Partition: the flat M*F range in 16-element chunks (elementwise; any nth gives the same bytes).
 */
#include <immintrin.h>

#include "km_common.h"

/* Elementwise: the flat range [0, M*F) in 16-element chunks, km_part over chunks. */
static void flat_slice(int64_t n, int ith, int nth, int64_t *lo, int64_t *hi) {
    int64_t c0, c1;
    km_part((n + 15) / 16, ith, nth, &c0, &c1);
    *lo = c0 * 16;
    *hi = c1 * 16 < n ? c1 * 16 : n;
}

static inline __m256 vexp(__m256 x) {
    x = _mm256_min_ps(_mm256_set1_ps(89.0f), x);
    const __m256 small = _mm256_cmp_ps(x, _mm256_set1_ps(-86.5f), _CMP_LT_OQ);
    x = _mm256_max_ps(_mm256_set1_ps(-86.5f), x);
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r);
    p = _mm256_add_ps(p, _mm256_set1_ps(1.0f));
    const __m256i bits = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(126)), 23);
    const __m256 e = _mm256_mul_ps(_mm256_mul_ps(p, _mm256_castsi256_ps(bits)), _mm256_set1_ps(2.0f));
    return _mm256_blendv_ps(e, _mm256_setzero_ps(), small);
}

void km_swiglu_f32__avx2(float *y, const float *gate, const float *up, int64_t M, int64_t F, int ith, int nth) {
    int64_t lo, hi;
    flat_slice(M * F, ith, nth, &lo, &hi);
    int64_t i = lo;
    const __m256 one = _mm256_set1_ps(1.0f), sign = _mm256_set1_ps(-0.0f);
    for (; i + 8 <= hi; i += 8) {
        const __m256 x = _mm256_loadu_ps(gate + i);
        const __m256 s = _mm256_div_ps(x, _mm256_add_ps(one, vexp(_mm256_xor_ps(x, sign))));
        _mm256_storeu_ps(y + i, _mm256_mul_ps(s, _mm256_loadu_ps(up + i)));
    }
    if (i < hi) {
        float xb[8] = {0}, ub[8] = {0}, yb[8];
        memcpy(xb, gate + i, (size_t)(hi - i) * sizeof(float));
        memcpy(ub, up + i, (size_t)(hi - i) * sizeof(float));
        const __m256 x = _mm256_loadu_ps(xb);
        const __m256 s = _mm256_div_ps(x, _mm256_add_ps(one, vexp(_mm256_xor_ps(x, sign))));
        _mm256_storeu_ps(yb, _mm256_mul_ps(s, _mm256_loadu_ps(ub)));
        memcpy(y + i, yb, (size_t)(hi - i) * sizeof(float));
    }
}
