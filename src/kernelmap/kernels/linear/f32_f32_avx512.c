/* linear/f32_f32_avx512.c — km_linear_f32_f32__avx512: linear.f32.f32.f32.v1 with AVX-512F.
 *
 * Op, layouts and numerics exactly as linear/f32_f32_ref.c, bit-exact with km_linear_f32_f32__ref:
 * the 16 partials are the 16 lanes of one register, updated with one FMA per element in increasing
 * k; a K tail is loaded with a mask (zero lanes add exactly +0); the tree folds 512 -> 256 bits
 * (s8[l] = p[l] + p[l+8]) and then runs km_tree8. Partition: output columns n, 4 weight rows at a time.
 */
#include "km_common.h"
#include "km_simd.h"

KM_ALWAYS_INLINE void rows(float *y, const float *w, int64_t K, const float *x, const int R) {
    __m512 a[4];
    for (int r = 0; r < R; r++) a[r] = _mm512_setzero_ps();
    int64_t k = 0;
    for (; k + 16 <= K; k += 16) {
        __m512 xv = _mm512_loadu_ps(x + k);
        for (int r = 0; r < R; r++) a[r] = _mm512_fmadd_ps(_mm512_loadu_ps(w + r * K + k), xv, a[r]);
    }
    if (k < K) {
        const __mmask16 m = (__mmask16)((1u << (K - k)) - 1u);
        __m512 xv = _mm512_maskz_loadu_ps(m, x + k);
        for (int r = 0; r < R; r++) a[r] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, w + r * K + k), xv, a[r]);
    }
    for (int r = 0; r < R; r++) {
        __m256 s8 = _mm256_add_ps(_mm512_castps512_ps256(a[r]), _mm512_extractf32x8_ps(a[r], 1));
        y[r] = km_avx2_tree8(s8);
    }
}

void km_linear_f32_f32__avx512(float *y, const float *w, const float *x, int64_t M, int64_t N, int64_t K,
                               int ith, int nth) {
    int64_t lo, hi;
    km_part(N, ith, nth, &lo, &hi);
    float out[4];
    int64_t n = lo;
    for (; n + 4 <= hi; n += 4) {
        for (int64_t m = 0; m < M; m++) {
            rows(out, w + n * K, K, x + m * K, 4);
            memcpy(&y[m * N + n], out, sizeof out);
        }
    }
    for (; n < hi; n++) {
        for (int64_t m = 0; m < M; m++) rows(&y[m * N + n], w + n * K, K, x + m * K, 1);
    }
}
