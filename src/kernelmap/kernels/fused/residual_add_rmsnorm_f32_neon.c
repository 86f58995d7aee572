/* fused/residual_add_rmsnorm_f32_neon.c — km_residual_add_rmsnorm_f32__neon: contract residual_add_rmsnorm.f32.v1.
 *
 * An instantiation of the family body fused/residual_add_rmsnorm_body.h (byte-identical to
 * km_residual_add_rmsnorm_f32__ref for every (ith, nth), and so to the other ISAs' instantiations) on the
 * AArch64 AdvSIMD lanes (4-lane q registers).
 */
#include "km_lanes_neon.h"
#include "residual_add_rmsnorm_body.h"

void km_residual_add_rmsnorm_f32__neon(float *y, float *h, const float *a, const float *b, const float *w, int64_t M,
                                       int64_t N, float eps, int ith, int nth) {
    kfr_residual_add_rmsnorm(y, h, a, b, w, M, N, eps, ith, nth, KFR_F32);
}
