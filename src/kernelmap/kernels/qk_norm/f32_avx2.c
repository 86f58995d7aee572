/* qk_norm/f32_avx2.c — km_qk_norm_f32__avx2: (AVX2) bit-exact with ref under contract qk_norm.f32.v1.
 *
 * Op: per-head RMS norm. x f32 [M, H*D] row-major is viewed as M*H heads of D values; each head is
 * normalised exactly as rmsnorm.f32.v1 normalises a row of N = D values (x*x rounded to f32, summed in
 * f64 into 16 partials by index mod 16, pairwise fold 8/4/2/1, mean = (float)(sum/D),
 * s = 1/sqrtf(mean + eps), y = (x*s)*w[d]), weight w f32 [D] shared by all heads; y may alias x.
 * This is ggml_rms_norm over dim 0 of the [D, H, M] view followed by ggml_mul with w, as llama.cpp's
 * QK-norm does. Any D >= 1. No FMA. Partition: (row, head) items, km_part over M*H; one thread per
 * head, so results are identical for every nth.
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

void km_qk_norm_f32__avx2(float *y, const float *x, const float *w, int64_t M, int64_t H, int64_t D,
        float eps, int ith, int nth) {
    int64_t lo, hi;
    km_part(M * H, ith, nth, &lo, &hi);
    const int64_t N = D;
    for (int64_t m = lo; m < hi; m++) /* m: (row, head) item = row * H + head */ {
        const float *xr = x + m * N; /* [D]: one head */
        float *yr = y + m * N;       /* [D]: one head */
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
