/* linear/q8_0_f32_avx512.c — km_linear_q8_0_f32__avx512: linear.q8_0.f32.f32.v1 with AVX-512F.
 *
 * Op, layouts and numerics exactly as linear/q8_0_f32_ref.c, bit-exact with km_linear_q8_0_f32__ref:
 * each block's weights are dequantized exactly (fp16(d) * q in f32); the 16 partials are the lanes
 * of one register, updated with one FMA per element in increasing k (block elements 0-15, then
 * 16-31); the tree folds 512 -> 256 bits and runs km_tree8. Partition: output columns n, 4 rows at a time.
 */
#include "km_common.h"
#include "km_simd.h"

KM_ALWAYS_INLINE void rows(float *y, const km_block_q8_0 *w, int64_t nb, const float *x, const int R) {
    __m512 a[4];
    for (int r = 0; r < R; r++) a[r] = _mm512_setzero_ps();
    for (int64_t j = 0; j < nb; j++) {
        __m512 x0 = _mm512_loadu_ps(x + j * 32), x1 = _mm512_loadu_ps(x + j * 32 + 16);
        for (int r = 0; r < R; r++) {
            const km_block_q8_0 *blk = &w[r * nb + j];
            __m512 d = _mm512_set1_ps(km_fp16_to_fp32(blk->d));
            __m512 w0 = _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)blk->qs))));
            __m512 w1 = _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(blk->qs + 16)))));
            a[r] = _mm512_fmadd_ps(w0, x0, a[r]);
            a[r] = _mm512_fmadd_ps(w1, x1, a[r]);
        }
    }
    for (int r = 0; r < R; r++) {
        __m256 s8 = _mm256_add_ps(_mm512_castps512_ps256(a[r]), _mm512_extractf32x8_ps(a[r], 1));
        y[r] = km_avx2_tree8(s8);
    }
}

void km_linear_q8_0_f32__avx512(float *y, const void *w, const float *x, int64_t M, int64_t N, int64_t K,
                                int ith, int nth) {
    int64_t lo, hi;
    km_part(N, ith, nth, &lo, &hi);
    const int64_t nb = K / KM_QK8_0;
    const km_block_q8_0 *wb = (const km_block_q8_0 *)w;
    float out[4];
    int64_t n = lo;
    for (; n + 4 <= hi; n += 4) {
        for (int64_t m = 0; m < M; m++) {
            rows(out, wb + n * nb, nb, x + m * K, 4);
            memcpy(&y[m * N + n], out, sizeof out);
        }
    }
    for (; n < hi; n++) {
        for (int64_t m = 0; m < M; m++) rows(&y[m * N + n], wb + n * nb, nb, x + m * K, 1);
    }
}
