/* quantize/bf16_avx512.c — km_quantize_act_bf16__avx512: contract quantize_act.bf16.v1.
 *
 * An instantiation of the family body quantize/convert_body.h (numerics there). Byte-identical to
 * km_quantize_act_bf16__ref for every (ith, nth), on the AVX-512 F/BW/VL/DQ lanes.
 */
#include "km_lanes_avx512.h"

#include "convert_body.h"

void km_quantize_act_bf16__avx512(void *y, const float *x, int64_t M, int64_t K, int ith, int nth) {
    kcv_convert(y, x, M, K, ith, nth, KCV_BF16);
}
