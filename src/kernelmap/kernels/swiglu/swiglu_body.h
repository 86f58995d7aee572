/* swiglu/swiglu_body.h — the family body of the SIMD variants of swiglu.f32.v1, written once against the
 * lanes interface (common/km_lanes.h); every ISA variant is an instantiation of it.
 *
 * Op: y = silu(gate) * up over f32 [M, F] (y may alias gate or up), silu(x) = x / (1 + exp(-x)) in f32:
 * y = (x / (1 + e(-x))) * up with IEEE division. The ref (swiglu/f32_ref.c) uses libm's expf; the variants
 * use kernelmap's vector exp e (common/km_vexp.h), so they are within the map's tolerance of the ref and
 * byte-identical with each other on every ISA.
 * Partition: the flat M*F range in 16-element chunks (common/km_eltwise.h). No schedule parameters.
 */
#ifndef KM_SWIGLU_BODY_H
#define KM_SWIGLU_BODY_H

#include "km_eltwise.h"
#include "km_vexp.h"

KL_INLINE kl_fv ksw_swiglu(kl_fv x, kl_fv g) {
    return kl_fv_mul(kl_fv_div(x, kl_fv_add(kl_fv_set1(1.0f), kvx_exp(kl_fv_neg(x)))), g);
}

static inline void ksw_swiglu_rows(float *y, const float *gate, const float *up, int64_t M, int64_t F, int ith,
                                   int nth) {
    kel_map2(y, gate, up, M * F, ith, nth, ksw_swiglu);
}

#endif /* KM_SWIGLU_BODY_H */
