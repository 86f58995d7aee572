/* fused/residual_add_rmsnorm_f32_avx2.c — km_residual_add_rmsnorm_f32__avx2 (AVX2): contract
 * residual_add_rmsnorm.f32.v1, bit-exact with fused/residual_add_rmsnorm_f32_ref.c.
 *
 * Same op, layouts, aliasing, partition and numerics as the ref. The 16 f64 partials live in four
 * 4-lane accumulators (acc0: i mod 16 in 0..3, acc1: 4..7, acc2: 8..11, acc3: 12..15). The tail
 * (N mod 16) goes through a zero-padded stack copy, so padded lanes add +0.0 to partials that are
 * never -0.0 (no change) and nothing past N is read or written. Fold: (acc0+acc2, acc1+acc3), then
 * halves, then the pair — the ref's order. Scaling is (y*s)*w per element, no FMA.
 */
#include <immintrin.h>
#include <math.h>

#include "km_common.h"

static inline void add_square16(const float *a, const float *b, float *y, __m256d acc[4]) {
    const __m256 v0 = _mm256_add_ps(_mm256_loadu_ps(a), _mm256_loadu_ps(b));
    const __m256 v1 = _mm256_add_ps(_mm256_loadu_ps(a + 8), _mm256_loadu_ps(b + 8));
    _mm256_storeu_ps(y, v0);
    _mm256_storeu_ps(y + 8, v1);
    const __m256 s0 = _mm256_mul_ps(v0, v0), s1 = _mm256_mul_ps(v1, v1);
    acc[0] = _mm256_add_pd(acc[0], _mm256_cvtps_pd(_mm256_castps256_ps128(s0)));
    acc[1] = _mm256_add_pd(acc[1], _mm256_cvtps_pd(_mm256_extractf128_ps(s0, 1)));
    acc[2] = _mm256_add_pd(acc[2], _mm256_cvtps_pd(_mm256_castps256_ps128(s1)));
    acc[3] = _mm256_add_pd(acc[3], _mm256_cvtps_pd(_mm256_extractf128_ps(s1, 1)));
}

void km_residual_add_rmsnorm_f32__avx2(float *y, float *h, const float *a, const float *b, const float *w,
                                       int64_t M, int64_t N, float eps, int ith, int nth) {
    int64_t lo, hi;
    km_part(M, ith, nth, &lo, &hi);
    const int64_t full = N & ~(int64_t)15;
    for (int64_t m = lo; m < hi; m++) {
        const float *ar = a + m * N; /* [N] */
        const float *br = b + m * N; /* [N] */
        float *yr = y + m * N;       /* [N] */
        float *hr = h + m * N;       /* [N] */
        __m256d acc[4] = {_mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd()};
        for (int64_t i = 0; i < full; i += 16) add_square16(ar + i, br + i, yr + i, acc);
        if (full < N) {
            float ta[16] = {0}, tb[16] = {0}, ty[16];
            const int64_t n = N - full;
            for (int64_t j = 0; j < n; j++) {
                ta[j] = ar[full + j];
                tb[j] = br[full + j];
            }
            add_square16(ta, tb, ty, acc);
            for (int64_t j = 0; j < n; j++) yr[full + j] = ty[j];
        }
        const __m256d t = _mm256_add_pd(_mm256_add_pd(acc[0], acc[2]), _mm256_add_pd(acc[1], acc[3]));
        const __m128d q = _mm_add_pd(_mm256_castpd256_pd128(t), _mm256_extractf128_pd(t, 1));
        const double sum = _mm_cvtsd_f64(q) + _mm_cvtsd_f64(_mm_unpackhi_pd(q, q));
        const float mean = (float)(sum / (double)N);
        const float scale = 1.0f / sqrtf(mean + eps);
        const __m256 vs = _mm256_set1_ps(scale);
        const int64_t full8 = N & ~(int64_t)7;
        for (int64_t i = 0; i < full8; i += 8) {
            const __m256 v = _mm256_mul_ps(_mm256_loadu_ps(yr + i), vs);
            _mm256_storeu_ps(hr + i, _mm256_mul_ps(v, _mm256_loadu_ps(w + i)));
        }
        for (int64_t i = full8; i < N; i++) hr[i] = (yr[i] * scale) * w[i];
    }
}
