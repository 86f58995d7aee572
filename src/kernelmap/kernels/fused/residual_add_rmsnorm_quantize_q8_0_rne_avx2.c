/* fused/residual_add_rmsnorm_quantize_q8_0_rne_avx2.c — km_residual_add_rmsnorm_quantize_q8_0_rne__avx2 (AVX2):
 * contract residual_add_rmsnorm_quantize.q8_0.rne.v1, bit-exact with the ref.
 *
 * Same op, layouts, aliasing, partition and numerics as fused/residual_add_rmsnorm_quantize_q8_0_rne_ref.c.
 * Sum of squares: four 4-lane f64 accumulators (acc0: i mod 16 in 0..3, ..., acc3: 12..15; N % 32 == 0
 * so there is no tail), fold (acc0+acc2, acc1+acc3), halves, pair — the ref's order. Per block:
 * h = (y*s)*w without FMA, amax exact in any order, the ref's scalar d/id/fp16(d), and vcvtps2dq in the
 * default rounding mode (nearest, halves to even) as the ref's rintf; int32 -> int8 by saturating packs
 * (values are within [-127, 127], so nothing saturates).
 */
#include <immintrin.h>
#include <math.h>

#include "km_common.h"

void km_residual_add_rmsnorm_quantize_q8_0_rne__avx2(float *y, void *q, const float *a, const float *b,
                                                 const float *w, int64_t M, int64_t N, float eps, int ith,
                                                 int nth) {
    int64_t lo, hi;
    km_part(M, ith, nth, &lo, &hi);
    const int64_t nb = N / KM_QK8_0;
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (int64_t m = lo; m < hi; m++) {
        const float *ar = a + m * N;                      /* [N] */
        const float *br = b + m * N;                      /* [N] */
        float *yr = y + m * N;                            /* [N] */
        km_block_q8_0 *qr = (km_block_q8_0 *)q + m * nb;  /* [N/32] blocks */
        __m256d acc[4] = {_mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd()};
        for (int64_t i = 0; i < N; i += 16) {
            const __m256 v0 = _mm256_add_ps(_mm256_loadu_ps(ar + i), _mm256_loadu_ps(br + i));
            const __m256 v1 = _mm256_add_ps(_mm256_loadu_ps(ar + i + 8), _mm256_loadu_ps(br + i + 8));
            _mm256_storeu_ps(yr + i, v0);
            _mm256_storeu_ps(yr + i + 8, v1);
            const __m256 s0 = _mm256_mul_ps(v0, v0), s1 = _mm256_mul_ps(v1, v1);
            acc[0] = _mm256_add_pd(acc[0], _mm256_cvtps_pd(_mm256_castps256_ps128(s0)));
            acc[1] = _mm256_add_pd(acc[1], _mm256_cvtps_pd(_mm256_extractf128_ps(s0, 1)));
            acc[2] = _mm256_add_pd(acc[2], _mm256_cvtps_pd(_mm256_castps256_ps128(s1)));
            acc[3] = _mm256_add_pd(acc[3], _mm256_cvtps_pd(_mm256_extractf128_ps(s1, 1)));
        }
        const __m256d t4 = _mm256_add_pd(_mm256_add_pd(acc[0], acc[2]), _mm256_add_pd(acc[1], acc[3]));
        const __m128d t2 = _mm_add_pd(_mm256_castpd256_pd128(t4), _mm256_extractf128_pd(t4, 1));
        const double sum = _mm_cvtsd_f64(t2) + _mm_cvtsd_f64(_mm_unpackhi_pd(t2, t2));
        const float mean = (float)(sum / (double)N);
        const __m256 vs = _mm256_set1_ps(1.0f / sqrtf(mean + eps));
        for (int64_t blk = 0; blk < nb; blk++) {
            const int64_t k = blk * KM_QK8_0;
            __m256 h[4];
            for (int j = 0; j < 4; j++) {
                h[j] = _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(yr + k + 8 * j), vs), _mm256_loadu_ps(w + k + 8 * j));
            }
            const __m256 mx = _mm256_max_ps(_mm256_max_ps(_mm256_andnot_ps(sign, h[0]), _mm256_andnot_ps(sign, h[1])),
                                            _mm256_max_ps(_mm256_andnot_ps(sign, h[2]), _mm256_andnot_ps(sign, h[3])));
            __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
            m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
            m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
            const float amax = _mm_cvtss_f32(m4);
            const float d = amax / 127.0f;
            const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
            qr[blk].d = km_fp32_to_fp16(d);
            const __m256 mul = _mm256_set1_ps(id);
            __m256i qi[4];
            for (int j = 0; j < 4; j++) qi[j] = _mm256_cvtps_epi32(_mm256_mul_ps(h[j], mul));
            __m256i p8 = _mm256_packs_epi16(_mm256_packs_epi32(qi[0], qi[1]), _mm256_packs_epi32(qi[2], qi[3]));
            p8 = _mm256_permutevar8x32_epi32(p8, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
            _mm256_storeu_si256((__m256i *)qr[blk].qs, p8);
        }
    }
}
