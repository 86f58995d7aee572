/* fused/geglu_quantize_q8_k_neon.c — km_geglu_quantize_q8_k__neon: contract geglu_quantize.tanh.q8_k.v1.
 *
 * An instantiation of the family body fused/geglu_quantize_body.h (byte-identical to km_geglu_quantize_q8_k__ref
 * for every (ith, nth), and so to the other ISAs' instantiations) on the AArch64 AdvSIMD lanes (4-lane q
 * registers).
 */
#include "km_lanes_neon.h"
#include "geglu_quantize_body.h"

void km_geglu_quantize_q8_k__neon(void *q, const float *gate, const float *up, int64_t M, int64_t F, int ith,
        int nth) {
    kgq_geglu_quantize(q, gate, up, M, F, ith, nth, KGQ_Q8_K);
}
