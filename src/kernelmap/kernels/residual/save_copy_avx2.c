/* residual/save_copy_avx2.c — km_residual_save_copy__avx2: (AVX2) byte-identical with ref under contract residual_save.copy.v1.
 *
 * Op: y = x, a byte copy of f32 [M, N] (row-major; y and x must not overlap). NaN payloads and
 * signed zeros are preserved (integer moves, no float arithmetic). Partition: the flat M*N range in
 * 16-element chunks (km_part over chunks).
 */
#include <immintrin.h>

#include "km_common.h"

/* Elementwise ops split the flat range [0, M*N) into 16-element chunks, km_part over chunks. */
static void flat_slice(int64_t n, int ith, int nth, int64_t *lo, int64_t *hi) {
    int64_t c0, c1;
    km_part((n + 15) / 16, ith, nth, &c0, &c1);
    *lo = c0 * 16;
    *hi = c1 * 16 < n ? c1 * 16 : n;
}

void km_residual_save_copy__avx2(float *y, const float *x, int64_t M, int64_t N, int ith, int nth) {
    int64_t lo, hi;
    flat_slice(M * N, ith, nth, &lo, &hi);
    int64_t i = lo;
    for (; i + 32 <= hi; i += 32) {
        const __m256i v0 = _mm256_loadu_si256((const __m256i *)(x + i));
        const __m256i v1 = _mm256_loadu_si256((const __m256i *)(x + i + 8));
        const __m256i v2 = _mm256_loadu_si256((const __m256i *)(x + i + 16));
        const __m256i v3 = _mm256_loadu_si256((const __m256i *)(x + i + 24));
        _mm256_storeu_si256((__m256i *)(y + i), v0);
        _mm256_storeu_si256((__m256i *)(y + i + 8), v1);
        _mm256_storeu_si256((__m256i *)(y + i + 16), v2);
        _mm256_storeu_si256((__m256i *)(y + i + 24), v3);
    }
    if (hi > i) memcpy(y + i, x + i, (size_t)(hi - i) * sizeof(float));
}
