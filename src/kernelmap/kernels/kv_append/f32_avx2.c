/* kv_append/f32_avx2.c — km_kv_append_f32__avx2: contract kv_append.f32.v1.
 *
 * An instantiation of the family body kv_append/kv_append_body.h (byte-identical to km_kv_append_f32__ref
 * for every (ith, nth), and so to the other ISAs' instantiations)
 * on the AVX2 + FMA + F16C lanes (8-lane ymm vectors).
 */
#include "km_lanes_avx2.h"
#include "kv_append_body.h"

void km_kv_append_f32__avx2(void *cache, const float *x, int64_t M, int64_t H, int64_t D, int64_t C, int64_t pos,
                            int ith, int nth) {
    kkv_append_f32(cache, x, M, H, D, C, pos, ith, nth);
}
