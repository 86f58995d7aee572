/* kv_append/f32_avx512.c — km_kv_append_f32__avx512: (AVX-512 F/BW/VL) byte-identical with ref under contract kv_append.f32.v1.
 *
 * Op: write the rows of x f32 [M, H*D] (row-major; row m at position pos + m) into the head-major
 * cache [H][C][D] (f32) at rows pos .. pos+M-1: cache[h][pos+m][d] = x[m][h*D + d].
 * The caller guarantees 0 <= pos and pos + M <= C. A plain copy of the f32 bits; SIMD variants are
 * byte-identical.
 * Partition: (row, head) items, km_part over M*H (each item is one D-long run; no reductions).
 */
#include <immintrin.h>

#include "km_common.h"

static void store_run(float *dst, const float *src, int64_t D) {
    for (int64_t d = 0; d < D; d += 16) {
        const __mmask16 k = (D - d >= 16) ? (__mmask16)0xFFFF : (__mmask16)((1u << (D - d)) - 1u);
        _mm512_mask_storeu_ps(dst + d, k, _mm512_maskz_loadu_ps(k, src + d));
    }
}

void km_kv_append_f32__avx512(void *cache, const float *x, int64_t M, int64_t H, int64_t D, int64_t C,
        int64_t pos, int ith, int nth) {
    float *kv = (float *)cache; /* [H][C][D] */
    int64_t lo, hi;
    km_part(M * H, ith, nth, &lo, &hi);
    for (int64_t it = lo; it < hi; it++) { /* it = m * H + h */
        const int64_t m = it / H, h = it % H;
        store_run(kv + (h * C + pos + m) * D, x + it * D, D);
    }
}
