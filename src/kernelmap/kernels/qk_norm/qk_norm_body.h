/* qk_norm/qk_norm_body.h — the family body of qk_norm.f32.v1, written once against the lanes interface
 * (common/km_lanes.h); every ISA variant is an instantiation of it.
 *
 * Numerics: exactly qk_norm/f32_ref.c — each of the M*H heads of D values is normalised as rmsnorm.f32.v1
 * normalises a row (common/km_rownorm.h), with the weight w [D] shared by all heads.
 * Partition: (row, head) items, km_part over M*H; y may alias x. No schedule parameters.
 */
#ifndef KM_QK_NORM_BODY_H
#define KM_QK_NORM_BODY_H

#include "km_rownorm.h"

static inline void kqkn_qk_norm(float *y, const float *x, const float *w, int64_t M, int64_t H, int64_t D, float eps,
                                int ith, int nth) {
    krn_rows(y, x, w, M * H, D, eps, ith, nth);
}

#endif /* KM_QK_NORM_BODY_H */
