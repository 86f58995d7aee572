/* quantize/q8_1_rne_neon.c — km_quantize_act_q8_1_rne__neon: contract quantize_act.q8_1.rne.v1.
 *
 * An instantiation of the family body quantize/q8_act_body.h (numerics there). Byte-identical to
 * km_quantize_act_q8_1_rne__ref (and so to the x86 variants) for every (ith, nth), on the AArch64 AdvSIMD
 * lanes.
 */
#include "km_lanes_neon.h"

#include "q8_act_body.h"

void km_quantize_act_q8_1_rne__neon(void *y, const float *x, int64_t M, int64_t K, int ith, int nth) {
    kqa_quantize(y, x, M, K, ith, nth, KQA_Q8_1);
}
