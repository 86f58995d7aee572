/* fused/residual_add_rmsnorm_quantize_q8_k_avx2.c — km_residual_add_rmsnorm_quantize_q8_k__avx2 (AVX2):
 * contract residual_add_rmsnorm_quantize.q8_k.v1, bit-exact with the ref.
 *
 * Same op, layouts, aliasing, partition and numerics as fused/residual_add_rmsnorm_quantize_q8_k_ref.c.
 * Sum of squares: four 4-lane f64 accumulators (acc0: i mod 16 in 0..3, ..., acc3: 12..15; N % 256 == 0,
 * no tail), fold (acc0+acc2, acc1+acc3), halves, pair — the ref's order. h = (y*s)*w without FMA into a
 * one-block stack buffer; quantization: exact vector max of |h|, signed max at the first index reaching
 * it (compare mask + count trailing zeros), one f32 multiply per element, vroundps to nearest even,
 * clamp at 127 in int32, saturating packs that lose nothing (|q| <= 127); bsums are integer sums
 * (exact in any order).
 */
#include <immintrin.h>
#include <math.h>

#include "km_common.h"

static inline int32_t hsum8(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
    return _mm_cvtsi128_si32(s);
}

static void quantize_block(const float *h, km_block_q8_k *q) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 vmax = _mm256_setzero_ps();
    for (int j = 0; j < KM_QK_K; j += 8) vmax = _mm256_max_ps(vmax, _mm256_andnot_ps(sign, _mm256_loadu_ps(h + j)));
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(vmax), _mm256_extractf128_ps(vmax, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    const float amax = _mm_cvtss_f32(m4);
    if (amax == 0.0f) {
        q->d = 0.0f;
        memset(q->qs, 0, sizeof q->qs);
        memset(q->bsums, 0, sizeof q->bsums);
        return;
    }
    const __m256 vamax = _mm256_set1_ps(amax);
    int first = 0;
    for (int j = 0; j < KM_QK_K; j += 8) {
        const int eq = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(h + j)), vamax, _CMP_EQ_OQ));
        if (eq) {
            first = j + __builtin_ctz((unsigned)eq);
            break;
        }
    }
    const float iscale = -127.0f / h[first];
    const __m256 vscale = _mm256_set1_ps(iscale);
    const __m256i cap = _mm256_set1_epi32(127);
    for (int j = 0; j < KM_QK_K; j += 32) {
        __m256i qi[4];
        for (int k = 0; k < 4; k++) {
            const __m256 v = _mm256_round_ps(_mm256_mul_ps(_mm256_loadu_ps(h + j + 8 * k), vscale),
                                             _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
            qi[k] = _mm256_min_epi32(_mm256_cvttps_epi32(v), cap);
        }
        q->bsums[j / 16] = (int16_t)hsum8(_mm256_add_epi32(qi[0], qi[1]));
        q->bsums[j / 16 + 1] = (int16_t)hsum8(_mm256_add_epi32(qi[2], qi[3]));
        __m256i p8 = _mm256_packs_epi16(_mm256_packs_epi32(qi[0], qi[1]), _mm256_packs_epi32(qi[2], qi[3]));
        p8 = _mm256_permutevar8x32_epi32(p8, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        _mm256_storeu_si256((__m256i *)(q->qs + j), p8);
    }
    q->d = 1.0f / iscale;
}

void km_residual_add_rmsnorm_quantize_q8_k__avx2(float *y, void *q, const float *a, const float *b,
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
            float h[KM_QK_K]; /* [256] normalised values of this block */
            for (int i = 0; i < KM_QK_K; i += 8) {
                const int64_t k = blk * KM_QK_K + i;
                _mm256_storeu_ps(h + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(yr + k), vs),
                                                      _mm256_loadu_ps(w + k)));
            }
            quantize_block(h, &qr[blk]);
        }
    }
}
