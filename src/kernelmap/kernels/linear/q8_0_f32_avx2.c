/* linear/q8_0_f32_avx2.c — km_linear_q8_0_f32__avx2: linear.q8_0.f32.f32.v1 with AVX2 + FMA + F16C.
 *
 * Op, layouts and numerics exactly as linear/q8_0_f32_ref.c, bit-exact with km_linear_q8_0_f32__ref:
 * each block's weights are dequantized exactly (fp16(d) * q in f32), partials 0..7 and 8..15 are two
 * vectors updated with one FMA per element in increasing k (block elements 0-7, 16-23 feed the first,
 * 8-15, 24-31 the second). Partition: output columns n, 4 weight rows at a time.
 */
#include "km_common.h"
#include "km_simd.h"

KM_ALWAYS_INLINE void rows(float *y, const km_block_q8_0 *w, int64_t nb, const float *x, const int R) {
    __m256 a[4], b[4];
    for (int r = 0; r < R; r++) a[r] = b[r] = _mm256_setzero_ps();
    for (int64_t j = 0; j < nb; j++) {
        __m256 xv[4];
        for (int q = 0; q < 4; q++) xv[q] = _mm256_loadu_ps(x + j * 32 + 8 * q);
        for (int r = 0; r < R; r++) {
            const km_block_q8_0 *blk = &w[r * nb + j];
            __m256 d = _mm256_set1_ps(km_fp16_to_fp32(blk->d));
            __m128i q0 = _mm_loadu_si128((const __m128i *)blk->qs);
            __m128i q1 = _mm_loadu_si128((const __m128i *)(blk->qs + 16));
            __m256 w0 = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q0)));
            __m256 w1 = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(q0, 8))));
            __m256 w2 = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q1)));
            __m256 w3 = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(q1, 8))));
            a[r] = _mm256_fmadd_ps(w0, xv[0], a[r]);
            b[r] = _mm256_fmadd_ps(w1, xv[1], b[r]);
            a[r] = _mm256_fmadd_ps(w2, xv[2], a[r]);
            b[r] = _mm256_fmadd_ps(w3, xv[3], b[r]);
        }
    }
    for (int r = 0; r < R; r++) y[r] = km_avx2_tree8(_mm256_add_ps(a[r], b[r]));
}

void km_linear_q8_0_f32__avx2(float *y, const void *w, const float *x, int64_t M, int64_t N, int64_t K,
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
