/* fused/qk_norm_rope_neox_f32_avx2.c — km_qk_norm_rope_neox_f32__avx2 (AVX2 + FMA): contract
 * qk_norm_rope.neox.f32.v1, bit-exact with fused/qk_norm_rope_neox_f32_ref.c.
 *
 * Same op, layouts, aliasing, partition and numerics as the ref. Norm: the 16 f64 partials live in four
 * 4-lane accumulators (acc0: index mod 16 in 0..3, ..., acc3: 12..15); the tail (D mod 16) goes through
 * a zero-padded stack copy (+0.0 added to partials that are never -0.0); fold (acc0+acc2, acc1+acc3),
 * halves, pair — the ref's order; scaling (x*s)*w without FMA. RoPE: the cos/sin cache is the ref's
 * scalar loop; the rotation is vfmsub/vfmadd with the products t1*s and t1*c rounded first (the ref's
 * fmaf points), 8 pairs per step and a scalar fmaf tail.
 */
#include <immintrin.h>
#include <math.h>

#include "km_common.h"

#define KM_ROPE_DMAX 512

static void rope_cache(float pos_f, float freq_scale, float theta_scale, int64_t half, float *cs, float *sn) {
    float theta = pos_f;
    for (int64_t i = 0; i < half; i++) {
        const float t = freq_scale * theta;
        cs[i] = cosf(t);
        sn[i] = sinf(t);
        theta *= theta_scale;
    }
}

static inline void square16(const float *p, __m256d acc[4]) {
    const __m256 v0 = _mm256_loadu_ps(p), v1 = _mm256_loadu_ps(p + 8);
    const __m256 s0 = _mm256_mul_ps(v0, v0), s1 = _mm256_mul_ps(v1, v1);
    acc[0] = _mm256_add_pd(acc[0], _mm256_cvtps_pd(_mm256_castps256_ps128(s0)));
    acc[1] = _mm256_add_pd(acc[1], _mm256_cvtps_pd(_mm256_extractf128_ps(s0, 1)));
    acc[2] = _mm256_add_pd(acc[2], _mm256_cvtps_pd(_mm256_castps256_ps128(s1)));
    acc[3] = _mm256_add_pd(acc[3], _mm256_cvtps_pd(_mm256_extractf128_ps(s1, 1)));
}

void km_qk_norm_rope_neox_f32__avx2(float *y, const float *x, const float *w, int64_t M, int64_t H,
                                    int64_t D, int64_t pos, float eps, float freq_base, float freq_scale,
                                    int ith, int nth) {
    const float theta_scale = powf(freq_base, -2.0f / (float)D);
    const int64_t half = D / 2;
    const int64_t full16 = D & ~(int64_t)15, full8 = D & ~(int64_t)7, half8 = half & ~(int64_t)7;
    float cs[KM_ROPE_DMAX / 2], sn[KM_ROPE_DMAX / 2]; /* [D/2] cache of the current row */
    float t[KM_ROPE_DMAX];                            /* [D] the normalised head */
    int64_t lo, hi, row = -1;
    km_part(M * H, ith, nth, &lo, &hi);
    for (int64_t it = lo; it < hi; it++) { /* it: (row, head) item = row * H + head */
        if (it / H != row) {
            row = it / H;
            rope_cache((float)(pos + row), freq_scale, theta_scale, half, cs, sn);
        }
        const float *xr = x + it * D; /* [D] */
        float *yr = y + it * D;       /* [D] */
        __m256d acc[4] = {_mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd()};
        for (int64_t i = 0; i < full16; i += 16) square16(xr + i, acc);
        if (full16 < D) {
            float pad[16] = {0};
            for (int64_t j = 0; j < D - full16; j++) pad[j] = xr[full16 + j];
            square16(pad, acc);
        }
        const __m256d q4 = _mm256_add_pd(_mm256_add_pd(acc[0], acc[2]), _mm256_add_pd(acc[1], acc[3]));
        const __m128d q2 = _mm_add_pd(_mm256_castpd256_pd128(q4), _mm256_extractf128_pd(q4, 1));
        const double sum = _mm_cvtsd_f64(q2) + _mm_cvtsd_f64(_mm_unpackhi_pd(q2, q2));
        const float mean = (float)(sum / (double)D);
        const float scale = 1.0f / sqrtf(mean + eps);
        const __m256 vs = _mm256_set1_ps(scale);
        for (int64_t i = 0; i < full8; i += 8) {
            const __m256 v = _mm256_mul_ps(_mm256_loadu_ps(xr + i), vs);
            _mm256_storeu_ps(t + i, _mm256_mul_ps(v, _mm256_loadu_ps(w + i)));
        }
        for (int64_t i = full8; i < D; i++) t[i] = (xr[i] * scale) * w[i];
        for (int64_t i = 0; i < half8; i += 8) {
            const __m256 x0 = _mm256_loadu_ps(t + i), x1 = _mm256_loadu_ps(t + i + half);
            const __m256 c = _mm256_loadu_ps(cs + i), s = _mm256_loadu_ps(sn + i);
            _mm256_storeu_ps(yr + i, _mm256_fmsub_ps(x0, c, _mm256_mul_ps(x1, s)));
            _mm256_storeu_ps(yr + i + half, _mm256_fmadd_ps(x0, s, _mm256_mul_ps(x1, c)));
        }
        for (int64_t i = half8; i < half; i++) {
            const float x0 = t[i], x1 = t[i + half];
            yr[i] = fmaf(x0, cs[i], -(x1 * sn[i]));
            yr[i + half] = fmaf(x0, sn[i], x1 * cs[i]);
        }
    }
}
