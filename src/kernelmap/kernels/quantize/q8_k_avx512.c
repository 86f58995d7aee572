/* quantize/q8_k_avx512.c — km_quantize_act_q8_k__avx512 (AVX-512 F/BW/VL/DQ): contract quantize_act.q8_k.v1.
 *
 * Op, layouts, partition and numerics exactly as quantize/q8_k_ref.c (rows; blocks when M == 1;
 * K a multiple of 256, no tails). Must be byte-identical to km_quantize_act_q8_k__ref:
 * exact vector max of |x|, signed max taken at the first index reaching it, one f32 multiply per
 * element, vrndscaleps to nearest-even, clamp at 127 in int32, then a truncating vpmovdb that
 * cannot lose bits (|q| <= 127). One 16-lane vector is exactly one bsums group.
 */
#include <immintrin.h>

#include "km_common.h"

static void quantize_block(const float *x, km_block_q8_k *y) {
    __m512 vmax = _mm512_setzero_ps();
    for (int j = 0; j < KM_QK_K; j += 16) {
        vmax = _mm512_max_ps(vmax, _mm512_abs_ps(_mm512_loadu_ps(x + j)));
    }
    const float amax = _mm512_reduce_max_ps(vmax);
    if (amax == 0.0f) {
        y->d = 0.0f;
        memset(y->qs, 0, sizeof y->qs);
        memset(y->bsums, 0, sizeof y->bsums);
        return;
    }
    const __m512 vamax = _mm512_set1_ps(amax);
    int first = 0;
    for (int j = 0; j < KM_QK_K; j += 16) {
        __mmask16 eq = _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_loadu_ps(x + j)), vamax, _CMP_EQ_OQ);
        if (eq) {
            first = j + __builtin_ctz((unsigned)eq);
            break;
        }
    }
    const float iscale = -127.0f / x[first];
    const __m512 vscale = _mm512_set1_ps(iscale);
    const __m512i cap = _mm512_set1_epi32(127);
    for (int j = 0; j < KM_QK_K; j += 16) {
        __m512 v = _mm512_mul_ps(_mm512_loadu_ps(x + j), vscale);
        v = _mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        __m512i q = _mm512_min_epi32(_mm512_cvttps_epi32(v), cap);
        _mm_storeu_si128((__m128i *)(y->qs + j), _mm512_cvtepi32_epi8(q));
        y->bsums[j / 16] = (int16_t)_mm512_reduce_add_epi32(q);
    }
    y->d = 1.0f / iscale;
}

void km_quantize_act_q8_k__avx512(void *y, const float *x, int64_t M, int64_t K, int ith, int nth) {
    const int64_t nb = K / KM_QK_K;
    km_block_q8_k *out = (km_block_q8_k *)y;
    int64_t lo, hi;
    if (M == 1) {
        km_part(nb, ith, nth, &lo, &hi);
        for (int64_t b = lo; b < hi; ++b) quantize_block(x + b * KM_QK_K, &out[b]);
        return;
    }
    km_part(M, ith, nth, &lo, &hi);
    for (int64_t m = lo; m < hi; ++m) {
        for (int64_t b = 0; b < nb; ++b) quantize_block(x + m * K + b * KM_QK_K, &out[m * nb + b]);
    }
}
