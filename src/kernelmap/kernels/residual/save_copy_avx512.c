/* residual/save_copy_avx512.c — km_residual_save_copy__avx512: (AVX-512 F) byte-identical with ref under contract residual_save.copy.v1.
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

void km_residual_save_copy__avx512(float *y, const float *x, int64_t M, int64_t N, int ith, int nth) {
    int64_t lo, hi;
    flat_slice(M * N, ith, nth, &lo, &hi);
    for (int64_t i = lo; i < hi; i += 16) {
        const __mmask16 k = (hi - i >= 16) ? (__mmask16)0xFFFF : (__mmask16)((1u << (hi - i)) - 1u);
        _mm512_mask_storeu_epi32(y + i, k, _mm512_maskz_loadu_epi32(k, x + i));
    }
}
