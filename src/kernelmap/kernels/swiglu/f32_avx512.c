/* swiglu/f32_avx512.c — km_swiglu_f32__avx512: (AVX-512 F + FMA) within tolerance of ref under contract swiglu.f32.v1.
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

static inline __m512 vexp(__m512 x) {
    x = _mm512_min_ps(_mm512_set1_ps(89.0f), x);
    const __mmask16 small = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-86.5f), _CMP_LT_OQ);
    x = _mm512_max_ps(_mm512_set1_ps(-86.5f), x);
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r);
    p = _mm512_add_ps(p, _mm512_set1_ps(1.0f));
    const __m512i bits = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(126)), 23);
    const __m512 e = _mm512_mul_ps(_mm512_mul_ps(p, _mm512_castsi512_ps(bits)), _mm512_set1_ps(2.0f));
    return _mm512_mask_blend_ps(small, e, _mm512_setzero_ps());
}

void km_swiglu_f32__avx512(float *y, const float *gate, const float *up, int64_t M, int64_t F, int ith, int nth) {
    int64_t lo, hi;
    flat_slice(M * F, ith, nth, &lo, &hi);
    const __m512 one = _mm512_set1_ps(1.0f);
    for (int64_t i = lo; i < hi; i += 16) {
        const __mmask16 k = (hi - i >= 16) ? (__mmask16)0xFFFF : (__mmask16)((1u << (hi - i)) - 1u);
        const __m512 x = _mm512_maskz_loadu_ps(k, gate + i);
        const __m512 nx = _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(x), _mm512_set1_epi32((int)0x80000000u)));
        const __m512 s = _mm512_div_ps(x, _mm512_add_ps(one, vexp(nx)));
        _mm512_mask_storeu_ps(y + i, k, _mm512_mul_ps(s, _mm512_maskz_loadu_ps(k, up + i)));
    }
}
