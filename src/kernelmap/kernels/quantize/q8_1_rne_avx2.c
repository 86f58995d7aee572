/* quantize/q8_1_rne_avx2.c — km_quantize_act_q8_1_rne__avx2: contract quantize_act.q8_1.rne.v1.
 *
 * An instantiation of the family body quantize/q8_act_body.h (numerics there). Byte-identical to
 * km_quantize_act_q8_1_rne__ref for every (ith, nth), on the AVX2 + FMA + F16C lanes.
 */
#include "km_lanes_avx2.h"

#include "q8_act_body.h"

void km_quantize_act_q8_1_rne__avx2(void *y, const float *x, int64_t M, int64_t K, int ith, int nth) {
    kqa_quantize(y, x, M, K, ith, nth, KQA_Q8_1);
}
