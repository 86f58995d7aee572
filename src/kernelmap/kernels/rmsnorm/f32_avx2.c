/* rmsnorm/f32_avx2.c — km_rmsnorm_f32__avx2 (AVX2): contract rmsnorm.f32.v1, bit-exact with ref.
 *
 * Same op, layouts, partition and numerics as rmsnorm/f32_ref.c. The 16 f64 partials live in four
 * 4-lane accumulators (a0: i mod 16 in 0..3, a1: 4..7, a2: 8..11, a3: 12..15); the tail (N mod 16)
 * is zero-padded, which adds +0.0 to partials that are never -0.0, so it changes nothing. The fold is
 * the ref's: (a0+a2, a1+a3), then halves, then pairs. Scaling is (x*s)*w per element, no FMA.
 */
#include <immintrin.h>
#include <math.h>

#include "km_common.h"

static inline void accumulate16(const float *p, __m256d acc[4]) {
    const __m256 v0 = _mm256_loadu_ps(p), v1 = _mm256_loadu_ps(p + 8);
    const __m256 s0 = _mm256_mul_ps(v0, v0), s1 = _mm256_mul_ps(v1, v1);
    acc[0] = _mm256_add_pd(acc[0], _mm256_cvtps_pd(_mm256_castps256_ps128(s0)));
    acc[1] = _mm256_add_pd(acc[1], _mm256_cvtps_pd(_mm256_extractf128_ps(s0, 1)));
    acc[2] = _mm256_add_pd(acc[2], _mm256_cvtps_pd(_mm256_castps256_ps128(s1)));
    acc[3] = _mm256_add_pd(acc[3], _mm256_cvtps_pd(_mm256_extractf128_ps(s1, 1)));
}

void km_rmsnorm_f32__avx2(float *y, const float *x, const float *w, int64_t M, int64_t N, float eps,
                          int ith, int nth) {
    int64_t lo, hi;
    km_part(M, ith, nth, &lo, &hi);
    for (int64_t m = lo; m < hi; m++) {
        const float *xr = x + m * N; /* [N] */
        float *yr = y + m * N;       /* [N] */
        __m256d acc[4] = {_mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd()};
        int64_t i = 0;
        for (; i + 16 <= N; i += 16) accumulate16(xr + i, acc);
        if (i < N) {
            float tail[16] = {0.0f};
            memcpy(tail, xr + i, (size_t)(N - i) * sizeof(float));
            accumulate16(tail, acc);
        }
        const __m256d h = _mm256_add_pd(_mm256_add_pd(acc[0], acc[2]), _mm256_add_pd(acc[1], acc[3]));
        const __m128d q = _mm_add_pd(_mm256_castpd256_pd128(h), _mm256_extractf128_pd(h, 1));
        const double sum = _mm_cvtsd_f64(q) + _mm_cvtsd_f64(_mm_unpackhi_pd(q, q));
        const float mean = (float)(sum / (double)N);
        const float scale = 1.0f / sqrtf(mean + eps);
        const __m256 vs = _mm256_set1_ps(scale);
        i = 0;
        for (; i + 8 <= N; i += 8) {
            const __m256 v = _mm256_mul_ps(_mm256_loadu_ps(xr + i), vs);
            _mm256_storeu_ps(yr + i, _mm256_mul_ps(v, _mm256_loadu_ps(w + i)));
        }
        for (; i < N; i++) yr[i] = (xr[i] * scale) * w[i];
    }
}
