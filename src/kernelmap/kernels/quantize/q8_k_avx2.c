/* quantize/q8_k_avx2.c — km_quantize_act_q8_k__avx2 (AVX2): contract quantize_act.q8_k.v1.
 *
 * Op, layouts, partition and numerics exactly as quantize/q8_k_ref.c (rows; blocks when M == 1;
 * K a multiple of 256, no tails). Must be byte-identical to km_quantize_act_q8_k__ref:
 * the block max is found with exact vector max, the signed max is the value at the first index
 * reaching it, iscale * x is one f32 multiply per element, rounding is vroundps to nearest-even,
 * the clamp at 127 is done in int32 before a saturating pack that cannot saturate (|q| <= 127).
 */
#include <immintrin.h>

#include "km_common.h"

static void quantize_block(const float *x, km_block_q8_k *y) {
    const __m256 signbit = _mm256_set1_ps(-0.0f);
    __m256 vmax = _mm256_setzero_ps();
    for (int j = 0; j < KM_QK_K; j += 8) {
        vmax = _mm256_max_ps(vmax, _mm256_andnot_ps(signbit, _mm256_loadu_ps(x + j)));
    }
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(vmax), _mm256_extractf128_ps(vmax, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    const float amax = _mm_cvtss_f32(m4);
    if (amax == 0.0f) {
        y->d = 0.0f;
        memset(y->qs, 0, sizeof y->qs);
        memset(y->bsums, 0, sizeof y->bsums);
        return;
    }
    const __m256 vamax = _mm256_set1_ps(amax);
    int first = 0;
    for (int j = 0; j < KM_QK_K; j += 8) {
        __m256 eq = _mm256_cmp_ps(_mm256_andnot_ps(signbit, _mm256_loadu_ps(x + j)), vamax, _CMP_EQ_OQ);
        int mask = _mm256_movemask_ps(eq);
        if (mask) {
            first = j + __builtin_ctz((unsigned)mask);
            break;
        }
    }
    const float iscale = -127.0f / x[first];
    const __m256 vscale = _mm256_set1_ps(iscale);
    const __m256i cap = _mm256_set1_epi32(127);
    const __m256i perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    for (int j = 0; j < KM_QK_K; j += 32) {
        __m256i q[4];
        for (int t = 0; t < 4; ++t) {
            __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + j + 8 * t), vscale);
            v = _mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
            q[t] = _mm256_min_epi32(_mm256_cvttps_epi32(v), cap);
        }
        __m256i ab = _mm256_packs_epi32(q[0], q[1]);
        __m256i cd = _mm256_packs_epi32(q[2], q[3]);
        __m256i bytes = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(ab, cd), perm);
        _mm256_storeu_si256((__m256i *)(y->qs + j), bytes);
        /* two bsums from these 32 bytes: widen to int16, pairwise add down to two sums */
        __m256i w0 = _mm256_cvtepi8_epi16(_mm256_castsi256_si128(bytes));
        __m256i w1 = _mm256_cvtepi8_epi16(_mm256_extracti128_si256(bytes, 1));
        __m256i s0 = _mm256_madd_epi16(w0, _mm256_set1_epi16(1));
        __m256i s1 = _mm256_madd_epi16(w1, _mm256_set1_epi16(1));
        __m256i h = _mm256_hadd_epi32(s0, s1); /* [s0 01,23 | s1 01,23 | s0 45,67 | s1 45,67] */
        h = _mm256_hadd_epi32(h, h);
        __m128i f = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
        y->bsums[j / 16] = (int16_t)_mm_cvtsi128_si32(f);
        y->bsums[j / 16 + 1] = (int16_t)_mm_extract_epi32(f, 1);
    }
    y->d = 1.0f / iscale;
}

void km_quantize_act_q8_k__avx2(void *y, const float *x, int64_t M, int64_t K, int ith, int nth) {
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
