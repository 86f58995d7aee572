/* fused/residual_add_rmsnorm_f32_avx512.c — km_residual_add_rmsnorm_f32__avx512 (AVX-512 F): contract
 * residual_add_rmsnorm.f32.v1, bit-exact with fused/residual_add_rmsnorm_f32_ref.c.
 *
 * Same op, layouts, aliasing, partition and numerics as the ref. The 16 f64 partials live in two
 * 8-lane accumulators (a0: i mod 16 in 0..7, a1: 8..15); the tail is a masked, zero-filled load and
 * a masked store (padded lanes add +0.0 to partials that are never -0.0: no change). Fold: a0+a1,
 * halves, halves, pair — the ref's order. Scaling is (y*s)*w per element with a masked tail, no FMA.
 */
#include <immintrin.h>
#include <math.h>

#include "km_common.h"

void km_residual_add_rmsnorm_f32__avx512(float *y, float *h, const float *a, const float *b, const float *w,
                                         int64_t M, int64_t N, float eps, int ith, int nth) {
    int64_t lo, hi;
    km_part(M, ith, nth, &lo, &hi);
    for (int64_t m = lo; m < hi; m++) {
        const float *ar = a + m * N; /* [N] */
        const float *br = b + m * N; /* [N] */
        float *yr = y + m * N;       /* [N] */
        float *hr = h + m * N;       /* [N] */
        __m512d a0 = _mm512_setzero_pd(), a1 = _mm512_setzero_pd();
        for (int64_t i = 0; i < N; i += 16) {
            const __mmask16 k = (N - i >= 16) ? (__mmask16)0xFFFF : (__mmask16)((1u << (N - i)) - 1u);
            const __m512 v = _mm512_add_ps(_mm512_maskz_loadu_ps(k, ar + i), _mm512_maskz_loadu_ps(k, br + i));
            _mm512_mask_storeu_ps(yr + i, k, v);
            const __m512 s = _mm512_mul_ps(v, v);
            a0 = _mm512_add_pd(a0, _mm512_cvtps_pd(_mm512_castps512_ps256(s)));
            a1 = _mm512_add_pd(a1, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(s), 1))));
        }
        const __m512d t = _mm512_add_pd(a0, a1);
        const __m256d t4 = _mm256_add_pd(_mm512_castpd512_pd256(t), _mm512_extractf64x4_pd(t, 1));
        const __m128d q = _mm_add_pd(_mm256_castpd256_pd128(t4), _mm256_extractf128_pd(t4, 1));
        const double sum = _mm_cvtsd_f64(q) + _mm_cvtsd_f64(_mm_unpackhi_pd(q, q));
        const float mean = (float)(sum / (double)N);
        const float scale = 1.0f / sqrtf(mean + eps);
        const __m512 vs = _mm512_set1_ps(scale);
        for (int64_t i = 0; i < N; i += 16) {
            const __mmask16 k = (N - i >= 16) ? (__mmask16)0xFFFF : (__mmask16)((1u << (N - i)) - 1u);
            const __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(k, yr + i), vs);
            _mm512_mask_storeu_ps(hr + i, k, _mm512_mul_ps(v, _mm512_maskz_loadu_ps(k, w + i)));
        }
    }
}
