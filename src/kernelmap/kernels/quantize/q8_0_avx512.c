/* quantize/q8_0_avx512.c — km_quantize_act_q8_0__avx512: contract quantize_act.q8_0.v1.
 *
 * An instantiation of the family body quantize/quantize_act_body.h (byte-identical to
 * km_quantize_act_q8_0__ref for every (ith, nth), and so to the other ISAs' instantiations)
 * on the AVX-512 F/BW/VL/DQ lanes (16-lane zmm vectors).
 */
#include "km_lanes_avx512.h"
#include "quantize_act_body.h"

void km_quantize_act_q8_0__avx512(void *y, const float *x, int64_t M, int64_t K, int ith, int nth) {
    kqa_quantize_q8_0(y, x, M, K, ith, nth);
}
