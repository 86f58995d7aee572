/* quantize/q8_0_avx2.c — km_quantize_act_q8_0__avx2: contract quantize_act.q8_0.v1.
 *
 * An instantiation of the family body quantize/quantize_act_body.h (byte-identical to
 * km_quantize_act_q8_0__ref for every (ith, nth), and so to the other ISAs' instantiations)
 * on the AVX2 + FMA + F16C lanes (8-lane ymm vectors).
 */
#include "km_lanes_avx2.h"
#include "quantize_act_body.h"

void km_quantize_act_q8_0__avx2(void *y, const float *x, int64_t M, int64_t K, int ith, int nth) {
    kqa_quantize_q8_0(y, x, M, K, ith, nth);
}
