/* residual/residual_body.h — the family body of residual_add.f32.v1 and residual_save.copy.v1, written once
 * against the lanes interface (common/km_lanes.h); every ISA variant of the two providers is an
 * instantiation of it.
 *
 * Numerics: exactly residual/add_f32_ref.c (y = a + b, one IEEE f32 add per element; y may alias a or b)
 * and residual/save_copy_ref.c (y = x, bit moves only: NaN payloads and signed zeros kept; no overlap).
 * Partition: the flat M*N range in 16-element chunks (common/km_eltwise.h).
 * Schedule: KRS_UNROLL vectors per copy step.
 */
#ifndef KM_RESIDUAL_BODY_H
#define KM_RESIDUAL_BODY_H

#include "km_eltwise.h"

static inline void kres_add(float *y, const float *a, const float *b, int64_t M, int64_t N, int ith, int nth) {
    kel_map2(y, a, b, M * N, ith, nth, kl_fv_add);
}

static inline void kres_copy(float *y, const float *x, int64_t M, int64_t N, int ith, int nth) {
    int64_t lo, hi;
    kel_flat_slice(M * N, ith, nth, &lo, &hi);
    int64_t i = lo;
    for (; i + KRS_UNROLL * KL_FV_LANES <= hi; i += KRS_UNROLL * KL_FV_LANES) {
        kl_fv v[KRS_UNROLL];
        for (int u = 0; u < KRS_UNROLL; u++) v[u] = kl_fv_loadu(x + i + u * KL_FV_LANES);
        for (int u = 0; u < KRS_UNROLL; u++) kl_fv_storeu(y + i + u * KL_FV_LANES, v[u]);
    }
    for (; i < hi; i += KL_FV_LANES) kel_store(y + i, kel_load(x + i, kel_lanes(hi - i)), kel_lanes(hi - i));
}

#endif /* KM_RESIDUAL_BODY_H */
