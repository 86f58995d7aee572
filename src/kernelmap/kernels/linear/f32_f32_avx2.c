/* linear/f32_f32_avx2.c — km_linear_f32_f32__avx2: linear.f32.f32.f32.v1 with AVX2 + FMA.
 *
 * Op, layouts and numerics exactly as linear/f32_f32_ref.c, bit-exact with km_linear_f32_f32__ref:
 * partials 0..7 and 8..15 are two vectors updated with one FMA per element in increasing k; a K
 * tail is loaded with a mask (zero lanes add exactly +0). Partition: output columns n, 4 weight rows
 * at a time, every activation row against those rows while they are in L1.
 */
#include "km_common.h"
#include "km_simd.h"

static inline __m256i tail_mask(int64_t n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

KM_ALWAYS_INLINE void rows(float *y, const float *w, int64_t K, const float *x, const int R) {
    __m256 a[4], b[4];
    for (int r = 0; r < R; r++) a[r] = b[r] = _mm256_setzero_ps();
    int64_t k = 0;
    for (; k + 16 <= K; k += 16) {
        __m256 x0 = _mm256_loadu_ps(x + k), x1 = _mm256_loadu_ps(x + k + 8);
        for (int r = 0; r < R; r++) {
            a[r] = _mm256_fmadd_ps(_mm256_loadu_ps(w + r * K + k), x0, a[r]);
            b[r] = _mm256_fmadd_ps(_mm256_loadu_ps(w + r * K + k + 8), x1, b[r]);
        }
    }
    if (k < K) {
        const int64_t rest = K - k;
        __m256i m0 = tail_mask(rest), m1 = tail_mask(rest - 8);
        __m256 x0 = _mm256_maskload_ps(x + k, m0), x1 = _mm256_maskload_ps(x + k + 8, m1);
        for (int r = 0; r < R; r++) {
            a[r] = _mm256_fmadd_ps(_mm256_maskload_ps(w + r * K + k, m0), x0, a[r]);
            b[r] = _mm256_fmadd_ps(_mm256_maskload_ps(w + r * K + k + 8, m1), x1, b[r]);
        }
    }
    for (int r = 0; r < R; r++) y[r] = km_avx2_tree8(_mm256_add_ps(a[r], b[r]));
}

void km_linear_f32_f32__avx2(float *y, const float *w, const float *x, int64_t M, int64_t N, int64_t K,
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
