/* geglu/geglu_body.h — the family body of geglu.tanh.f32.v1, written once against the lanes interface
 * (common/km_lanes.h); every ISA variant is an instantiation of it.
 *
 * Numerics: exactly geglu/tanh_f32_ref.c (llama.cpp's CPU geglu with GGML_GELU_FP16): gate <= -10 gives
 * +0.0; gate >= 10 gives gate * up; a NaN gate gives the f32 quiet NaN 0x7FC00000 times up; otherwise the
 * gate rounded to f16 (nearest even) indexes gelu_table.h, whose f16 entry widened to f32 is multiplied by
 * up (one f32 multiply). Op: y = gelu(gate) * up over f32 [M, F] (y may alias gate or up).
 * Partition: the flat M*F range in 16-element chunks (common/km_eltwise.h). No schedule parameters.
 */
#ifndef KM_GEGLU_BODY_H
#define KM_GEGLU_BODY_H

#include "gelu_table.h"
#include "km_eltwise.h"

KL_INLINE kl_fv kgg_geglu(kl_fv x, kl_fv g) {
    const uint32_t bits = 0x7FC00000u; /* the table's NaN entry 0x7E00 widened to f32 */
    float qnan;
    memcpy(&qnan, &bits, sizeof qnan);
    kl_fv t = kl_fv_f16_lut(km_gelu_f16_table, x, KM_GELU_MAX_MAG, KM_GELU_HALF);
    t = kl_fv_blend(t, kl_fv_set1(qnan), kl_fv_isnan(x));
    kl_fv r = kl_fv_mul(t, g);
    r = kl_fv_blend(r, kl_fv_mul(x, g), kl_fv_cmp_ge(x, kl_fv_set1(10.0f)));
    return kl_fv_blend(r, kl_fv_zero(), kl_fv_cmp_le(x, kl_fv_set1(-10.0f)));
}

static inline void kgg_geglu_rows(float *y, const float *gate, const float *up, int64_t M, int64_t F, int ith,
                                  int nth) {
    kel_map2(y, gate, up, M * F, ith, nth, kgg_geglu);
}

#endif /* KM_GEGLU_BODY_H */
