/* kv_append/f16_ref.c — km_kv_append_f16__ref: the scalar oracle of contract kv_append.f16.v1.
 *
 * Op: write the rows of x f32 [M, H*D] (row-major; row m at position pos + m) into the head-major
 * cache [H][C][D] (f16) of C cells, position j in cell j mod C: cache[h][(pos+m) mod C][d] = f16(x[m][h*D + d]).
 * C >= every position is the full-length layout (cell = position); a smaller C is a ring buffer (the map's
 * ports declare "ring": "write"). The caller guarantees 0 <= pos and M <= C. f32 -> f16 rounds to nearest even
 * (km_fp32_to_fp16); overflow gives inf; every NaN becomes the quiet NaN sign|0x7E00. SIMD variants
 * use the hardware conversion (F16C vcvtps2ph, NEON fcvtn: the same rounding) and redo vectors holding
 * a NaN with the scalar conversion, so they are byte-identical with ref.
 * Partition: (row, head) items, km_part over M*H (each item is one D-long run; no reductions).
 */
#include "km_common.h"

static void store_run(km_half *dst, const float *src, int64_t D) {
    for (int64_t d = 0; d < D; d++) dst[d] = km_fp32_to_fp16(src[d]);
}

void km_kv_append_f16__ref(void *cache, const float *x, int64_t M, int64_t H, int64_t D, int64_t C,
        int64_t pos, int ith, int nth) {
    km_half *kv = (km_half *)cache; /* [H][C][D] */
    int64_t lo, hi;
    km_part(M * H, ith, nth, &lo, &hi);
    for (int64_t it = lo; it < hi; it++) { /* it = m * H + h */
        const int64_t m = it / H, h = it % H;
        store_run(kv + (h * C + (pos + m) % C) * D, x + it * D, D);
    }
}
