/* moe/router_body.h — the family body of contract moe_router.f32.ggml.v1, written once against the lanes
 * interface (common/km_lanes.h); every ISA variant of moe_router_f32 is an instantiation of it.
 *
 * Numerics: exactly moe/router_f32_ref.c. The logit of expert e is llama.cpp's AVX-512 ggml_vec_dot_f32:
 * 64 accumulator lanes (4 accumulators of 16), element i of each 64-block fused into lane i % 64 in
 * increasing i, then a0 + a2, a1 + a3, their sum, and the 16 lanes folded by _mm512_reduce_add_ps's tree
 * (km_router_reduce16). No float operation crosses accumulator lanes before that fold, so the 64 lanes
 * are held as 64 / KL_FV_LANES native vectors (lane l of vector v = accumulator lane v * KL_FV_LANES + l)
 * and the result cannot depend on the vector width. The softmax, top-U and weights are the ref's own
 * steps and row loop (moe/router_select.h, km_router_rows around krt_dot). K a multiple of 64.
 * Partition: rows m (km_part over M); each row is computed whole by one thread. No schedule parameters.
 */
#ifndef KM_MOE_ROUTER_BODY_H
#define KM_MOE_ROUTER_BODY_H

#include "km_common.h"
#include "km_lanes.h"
#include "router_select.h"

#define KRT_NV (64 / KL_FV_LANES) /* vectors per 64 accumulator lanes */
#define KRT_NH (16 / KL_FV_LANES) /* vectors per accumulator of 16 lanes */

/* The logit: the provider's dot for km_router_rows (router_select.h). */
KL_INLINE float krt_dot(const float *w, const float *x, int64_t K) {
    kl_fv acc[KRT_NV];
    for (int v = 0; v < KRT_NV; v++) acc[v] = kl_fv_zero();
    for (int64_t i = 0; i < K; i += 64) {
        for (int v = 0; v < KRT_NV; v++)
            acc[v] = kl_fv_fma(kl_fv_loadu(w + i + v * KL_FV_LANES), kl_fv_loadu(x + i + v * KL_FV_LANES), acc[v]);
    }
    float a0[16];
    for (int h = 0; h < KRT_NH; h++) { /* accumulator j's lanes h * KL_FV_LANES .. are vector j * KRT_NH + h */
        const kl_fv s02 = kl_fv_add(acc[h], acc[2 * KRT_NH + h]);
        const kl_fv s13 = kl_fv_add(acc[KRT_NH + h], acc[3 * KRT_NH + h]);
        kl_fv_storeu(a0 + h * KL_FV_LANES, kl_fv_add(s02, s13));
    }
    return km_router_reduce16(a0);
}

#endif /* KM_MOE_ROUTER_BODY_H */
