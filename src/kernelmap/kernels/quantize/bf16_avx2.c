/* quantize/bf16_avx2.c — km_quantize_act_bf16__avx2: contract quantize_act.bf16.v1.
 *
 * An instantiation of the family body quantize/convert_body.h (numerics there). Byte-identical to
 * km_quantize_act_bf16__ref for every (ith, nth), on the AVX2 + FMA + F16C lanes.
 */
#include "km_lanes_avx2.h"

#include "convert_body.h"

void km_quantize_act_bf16__avx2(void *y, const float *x, int64_t M, int64_t K, int ith, int nth) {
    kcv_convert(y, x, M, K, ith, nth, KCV_BF16);
}
