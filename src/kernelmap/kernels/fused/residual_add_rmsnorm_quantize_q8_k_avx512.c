/* fused/residual_add_rmsnorm_quantize_q8_k_avx512.c — km_residual_add_rmsnorm_quantize_q8_k__avx512
 * (AVX-512 F/BW/VL/DQ): contract residual_add_rmsnorm_quantize.q8_k.v1, bit-exact with the ref.
 *
 * Same op, layouts, aliasing, partition and numerics as fused/residual_add_rmsnorm_quantize_q8_k_ref.c.
 * Sum of squares: two 8-lane f64 accumulators (a0: i mod 16 in 0..7, a1: 8..15; N % 256 == 0, no
 * tail), fold a0+a1, halves, halves, pair — the ref's order. h = (y*s)*w without FMA into a one-block
 * stack buffer; quantization: exact vector max of |h|, signed max at the first index reaching it
 * (compare mask + count trailing zeros), one f32 multiply per element, vrndscaleps to nearest even,
 * clamp at 127 in int32, a truncating vpmovdb that loses nothing (|q| <= 127); one 16-lane vector is
 * one bsums group (integer sum, exact in any order).
 */
#include <immintrin.h>
#include <math.h>

#include "km_common.h"

static void quantize_block(const float *h, km_block_q8_k *q) {
    __m512 vmax = _mm512_setzero_ps();
    for (int j = 0; j < KM_QK_K; j += 16) vmax = _mm512_max_ps(vmax, _mm512_abs_ps(_mm512_loadu_ps(h + j)));
    const float amax = _mm512_reduce_max_ps(vmax);
    if (amax == 0.0f) {
        q->d = 0.0f;
        memset(q->qs, 0, sizeof q->qs);
        memset(q->bsums, 0, sizeof q->bsums);
        return;
    }
    const __m512 vamax = _mm512_set1_ps(amax);
    int first = 0;
    for (int j = 0; j < KM_QK_K; j += 16) {
        const __mmask16 eq = _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_loadu_ps(h + j)), vamax, _CMP_EQ_OQ);
        if (eq) {
            first = j + __builtin_ctz((unsigned)eq);
            break;
        }
    }
    const float iscale = -127.0f / h[first];
    const __m512 vscale = _mm512_set1_ps(iscale);
    const __m512i cap = _mm512_set1_epi32(127);
    for (int j = 0; j < KM_QK_K; j += 16) {
        __m512 v = _mm512_mul_ps(_mm512_loadu_ps(h + j), vscale);
        v = _mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        const __m512i qi = _mm512_min_epi32(_mm512_cvttps_epi32(v), cap);
        _mm_storeu_si128((__m128i *)(q->qs + j), _mm512_cvtepi32_epi8(qi));
        q->bsums[j / 16] = (int16_t)_mm512_reduce_add_epi32(qi);
    }
    q->d = 1.0f / iscale;
}

void km_residual_add_rmsnorm_quantize_q8_k__avx512(float *y, void *q, const float *a, const float *b,
                                                   const float *w, int64_t M, int64_t N, float eps, int ith,
                                                   int nth) {
    int64_t lo, hi;
    km_part(M, ith, nth, &lo, &hi);
    const int64_t nb = N / KM_QK_K;
    for (int64_t m = lo; m < hi; m++) {
        const float *ar = a + m * N;                      /* [N] */
        const float *br = b + m * N;                      /* [N] */
        float *yr = y + m * N;                            /* [N] */
        km_block_q8_k *qr = (km_block_q8_k *)q + m * nb;  /* [N/256] blocks */
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
            float h[KM_QK_K]; /* [256] normalised values of this block */
            for (int i = 0; i < KM_QK_K; i += 16) {
                const int64_t k = blk * KM_QK_K + i;
                _mm512_storeu_ps(h + i, _mm512_mul_ps(_mm512_mul_ps(_mm512_loadu_ps(yr + k), vs),
                                                      _mm512_loadu_ps(w + k)));
            }
            quantize_block(h, &qr[blk]);
        }
    }
}
