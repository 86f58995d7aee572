/* fused/qk_norm_rope_neox_f32_avx512.c — km_qk_norm_rope_neox_f32__avx512 (AVX-512 F + FMA): contract
 * qk_norm_rope.neox.f32.v1, bit-exact with fused/qk_norm_rope_neox_f32_ref.c.
 *
 * Same op, layouts, aliasing, partition and numerics as the ref. Norm: the 16 f64 partials live in two
 * 8-lane accumulators (a0: index mod 16 in 0..7, a1: 8..15), masked zero-filled tail (adds +0.0 to
 * partials that are never -0.0), fold a0+a1, halves, halves, pair — the ref's order; scaling (x*s)*w
 * without FMA. RoPE: the cos/sin cache is the ref's scalar loop; the rotation is vfmsub/vfmadd on
 * (t0*c - t1*s, t0*s + t1*c) with the products t1*s and t1*c rounded first — the ref's fmaf points.
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

static inline __mmask16 tail_mask(int64_t left) {
    return left >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1u);
}

void km_qk_norm_rope_neox_f32__avx512(float *y, const float *x, const float *w, int64_t M, int64_t H,
                                      int64_t D, int64_t pos, float eps, float freq_base, float freq_scale,
                                      int ith, int nth) {
    const float theta_scale = powf(freq_base, -2.0f / (float)D);
    const int64_t half = D / 2;
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
        __m512d a0 = _mm512_setzero_pd(), a1 = _mm512_setzero_pd();
        for (int64_t i = 0; i < D; i += 16) {
            const __mmask16 k = tail_mask(D - i);
            const __m512 v = _mm512_maskz_loadu_ps(k, xr + i);
            const __m512 s = _mm512_mul_ps(v, v);
            a0 = _mm512_add_pd(a0, _mm512_cvtps_pd(_mm512_castps512_ps256(s)));
            a1 = _mm512_add_pd(a1, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(s), 1))));
        }
        const __m512d q8 = _mm512_add_pd(a0, a1);
        const __m256d q4 = _mm256_add_pd(_mm512_castpd512_pd256(q8), _mm512_extractf64x4_pd(q8, 1));
        const __m128d q2 = _mm_add_pd(_mm256_castpd256_pd128(q4), _mm256_extractf128_pd(q4, 1));
        const double sum = _mm_cvtsd_f64(q2) + _mm_cvtsd_f64(_mm_unpackhi_pd(q2, q2));
        const float mean = (float)(sum / (double)D);
        const __m512 vs = _mm512_set1_ps(1.0f / sqrtf(mean + eps));
        for (int64_t i = 0; i < D; i += 16) {
            const __mmask16 k = tail_mask(D - i);
            const __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(k, xr + i), vs);
            _mm512_mask_storeu_ps(t + i, k, _mm512_mul_ps(v, _mm512_maskz_loadu_ps(k, w + i)));
        }
        for (int64_t i = 0; i < half; i += 16) {
            const __mmask16 k = tail_mask(half - i);
            const __m512 x0 = _mm512_maskz_loadu_ps(k, t + i), x1 = _mm512_maskz_loadu_ps(k, t + i + half);
            const __m512 c = _mm512_maskz_loadu_ps(k, cs + i), s = _mm512_maskz_loadu_ps(k, sn + i);
            _mm512_mask_storeu_ps(yr + i, k, _mm512_fmsub_ps(x0, c, _mm512_mul_ps(x1, s)));
            _mm512_mask_storeu_ps(yr + i + half, k, _mm512_fmadd_ps(x0, s, _mm512_mul_ps(x1, c)));
        }
    }
}
