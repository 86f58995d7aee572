/* kv_append/f32_avx512.c — km_kv_append_f32__avx512: contract kv_append.f32.v1.
 *
 * An instantiation of the family body kv_append/kv_append_body.h (byte-identical to km_kv_append_f32__ref
 * for every (ith, nth), and so to the other ISAs' instantiations)
 * on the AVX-512 F/BW/VL/DQ lanes (16-lane zmm vectors).
 */
#include "km_lanes_avx512.h"
#include "kv_append_body.h"

void km_kv_append_f32__avx512(void *cache, const float *x, int64_t M, int64_t H, int64_t D, int64_t C, int64_t pos,
                              int ith, int nth) {
    kkv_append_f32(cache, x, M, H, D, C, pos, ith, nth);
}
