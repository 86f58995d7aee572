/* fused/residual_add_rmsnorm_quantize_q8_0_rne_avx512.c — km_residual_add_rmsnorm_quantize_q8_0_rne__avx512
 * (AVX-512 F/BW/VL/DQ): contract residual_add_rmsnorm_quantize.q8_0.rne.v1, bit-exact with the ref.
 *
 * Same op, layouts, aliasing, partition and numerics as fused/residual_add_rmsnorm_quantize_q8_0_rne_ref.c.
 * Sum of squares: two 8-lane f64 accumulators (a0: i mod 16 in 0..7, a1: 8..15; N % 32 == 0 so there
 * is no tail), fold a0+a1, halves, halves, pair — the ref's order. Per block: h = (y*s)*w without FMA,
 * amax is exact in any order, d/id/fp16(d) are the ref's scalar operations, and vcvtps2dq in the
 * default rounding mode (nearest, halves to even) is the ref's rintf.
 */
#include <immintrin.h>
#include <math.h>

#include "km_common.h"

void km_residual_add_rmsnorm_quantize_q8_0_rne__avx512(float *y, void *q, const float *a, const float *b,
                                                   const float *w, int64_t M, int64_t N, float eps, int ith,
                                                   int nth) {
    int64_t lo, hi;
    km_part(M, ith, nth, &lo, &hi);
    const int64_t nb = N / KM_QK8_0;
    for (int64_t m = lo; m < hi; m++) {
        const float *ar = a + m * N;                      /* [N] */
        const float *br = b + m * N;                      /* [N] */
        float *yr = y + m * N;                            /* [N] */
        km_block_q8_0 *qr = (km_block_q8_0 *)q + m * nb;  /* [N/32] blocks */
        __m512d a0 = _mm512_setzero_pd(), a1 = _mm512_setzero_pd();
        for (int64_t i = 0; i < N; i += 16) {
            const __m512 v = _mm512_add_ps(_mm512_loadu_ps(ar + i), _mm512_loadu_ps(br + i));
            _mm512_storeu_ps(yr + i, v);
            const __m512 s = _mm512_mul_ps(v, v);
            a0 = _mm512_add_pd(a0, _mm512_cvtps_pd(_mm512_castps512_ps256(s)));
            a1 = _mm512_add_pd(a1, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(s), 1))));
        }
        const __m512d t8 = _mm512_add_pd(a0, a1);
        const __m256d t4 = _mm256_add_pd(_mm512_castpd512_pd256(t8), _mm512_extractf64x4_pd(t8, 1));
        const __m128d t2 = _mm_add_pd(_mm256_castpd256_pd128(t4), _mm256_extractf128_pd(t4, 1));
        const double sum = _mm_cvtsd_f64(t2) + _mm_cvtsd_f64(_mm_unpackhi_pd(t2, t2));
        const float mean = (float)(sum / (double)N);
        const __m512 vs = _mm512_set1_ps(1.0f / sqrtf(mean + eps));
        for (int64_t blk = 0; blk < nb; blk++) {
            const int64_t k = blk * KM_QK8_0;
            const __m512 h0 = _mm512_mul_ps(_mm512_mul_ps(_mm512_loadu_ps(yr + k), vs), _mm512_loadu_ps(w + k));
            const __m512 h1 = _mm512_mul_ps(_mm512_mul_ps(_mm512_loadu_ps(yr + k + 16), vs), _mm512_loadu_ps(w + k + 16));
            const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(h0), _mm512_abs_ps(h1)));
            const float d = amax / 127.0f;
            const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
            qr[blk].d = km_fp32_to_fp16(d);
            const __m512 mul = _mm512_set1_ps(id);
            const __m128i q0 = _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(h0, mul)));
            const __m128i q1 = _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(h1, mul)));
            _mm_storeu_si128((__m128i *)qr[blk].qs, q0);
            _mm_storeu_si128((__m128i *)(qr[blk].qs + 16), q1);
        }
    }
}
