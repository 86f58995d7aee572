/* fused/geglu_quantize_q8_k_avx512.c — km_geglu_quantize_q8_k__avx512: contract geglu_quantize.tanh.q8_k.v1.
 *
 * An instantiation of the family body fused/geglu_quantize_body.h (byte-identical to km_geglu_quantize_q8_k__ref
 * for every (ith, nth), and so to the other ISAs' instantiations) on the AVX-512 F/BW/VL/DQ lanes (16-lane zmm
 * vectors).
 */
#include "km_lanes_avx512.h"
#include "geglu_quantize_body.h"

void km_geglu_quantize_q8_k__avx512(void *q, const float *gate, const float *up, int64_t M, int64_t F, int ith,
        int nth) {
    kgq_geglu_quantize(q, gate, up, M, F, ith, nth, KGQ_Q8_K);
}
