/* rmsnorm/rmsnorm_body.h — the family body of rmsnorm.f32.v1, written once against the lanes interface
 * (common/km_lanes.h); every ISA variant is an instantiation of it.
 *
 * Numerics: exactly rmsnorm/f32_ref.c (the order is in common/km_rownorm.h: f32 squares, 16 f64 partials
 * by index mod 16 folded 8/4/2/1, mean in f32, y = (x * s) * w without FMA).
 * Partition: rows (km_part over M); y may alias x. No schedule parameters.
 */
#ifndef KM_RMSNORM_BODY_H
#define KM_RMSNORM_BODY_H

#include "km_rownorm.h"

static inline void krms_rmsnorm(float *y, const float *x, const float *w, int64_t M, int64_t N, float eps, int ith,
                                int nth) {
    krn_rows(y, x, w, M, N, eps, ith, nth);
}

#endif /* KM_RMSNORM_BODY_H */
