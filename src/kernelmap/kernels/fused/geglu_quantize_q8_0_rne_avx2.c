/* fused/geglu_quantize_q8_0_rne_avx2.c — km_geglu_quantize_q8_0_rne__avx2: contract geglu_quantize.tanh.q8_0.rne.v1.
 *
 * An instantiation of the family body fused/geglu_quantize_body.h (byte-identical to
 * km_geglu_quantize_q8_0_rne__ref for every (ith, nth), and so to the other ISAs' instantiations) on the AVX2 + FMA
 * + F16C lanes (8-lane ymm vectors).
 */
#include "km_lanes_avx2.h"
#include "geglu_quantize_body.h"

void km_geglu_quantize_q8_0_rne__avx2(void *q, const float *gate, const float *up, int64_t M, int64_t F, int ith,
        int nth) {
    kgq_geglu_quantize(q, gate, up, M, F, ith, nth, KGQ_Q8_0);
}
