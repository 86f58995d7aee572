/* kv_append/f16_avx512.c — km_kv_append_f16__avx512: (AVX-512 F/BW/VL) byte-identical with ref under contract kv_append.f16.v1.
 *
 * Op: write the rows of x f32 [M, H*D] (row-major; row m at position pos + m) into the head-major
 * cache [H][C][D] (f16) at rows pos .. pos+M-1: cache[h][pos+m][d] = f16(x[m][h*D + d]).
 * The caller guarantees 0 <= pos and pos + M <= C. f32 -> f16 rounds to nearest even
 * (km_fp32_to_fp16); overflow gives inf; every NaN becomes the quiet NaN sign|0x7E00. SIMD variants
 * use F16C vcvtps2ph (same rounding) and redo lanes holding NaN with the scalar conversion, so they
 * are byte-identical with ref.
 * Partition: (row, head) items, km_part over M*H (each item is one D-long run; no reductions).
 */
#include <immintrin.h>

#include "km_common.h"

static void store_run(km_half *dst, const float *src, int64_t D) {
    for (int64_t d = 0; d < D; d += 16) {
        const __mmask16 k = (D - d >= 16) ? (__mmask16)0xFFFF : (__mmask16)((1u << (D - d)) - 1u);
        const __m512 v = _mm512_maskz_loadu_ps(k, src + d);
        if (_mm512_mask_cmp_ps_mask(k, v, v, _CMP_UNORD_Q)) {
            for (int64_t j = d; j < d + 16 && j < D; j++) dst[j] = km_fp32_to_fp16(src[j]);
        } else {
            _mm256_mask_storeu_epi16(dst + d, k, _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        }
    }
}

void km_kv_append_f16__avx512(void *cache, const float *x, int64_t M, int64_t H, int64_t D, int64_t C,
        int64_t pos, int ith, int nth) {
    km_half *kv = (km_half *)cache; /* [H][C][D] */
    int64_t lo, hi;
    km_part(M * H, ith, nth, &lo, &hi);
    for (int64_t it = lo; it < hi; it++) { /* it = m * H + h */
        const int64_t m = it / H, h = it % H;
        store_run(kv + (h * C + pos + m) * D, x + it * D, D);
    }
}
