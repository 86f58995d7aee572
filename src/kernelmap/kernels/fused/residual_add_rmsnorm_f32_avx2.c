/* fused/residual_add_rmsnorm_f32_avx2.c — km_residual_add_rmsnorm_f32__avx2: contract residual_add_rmsnorm.f32.v1.
 *
 * An instantiation of the family body fused/residual_add_rmsnorm_body.h (byte-identical to
 * km_residual_add_rmsnorm_f32__ref for every (ith, nth), and so to the other ISAs' instantiations) on the
 * AVX2 + FMA + F16C lanes (8-lane ymm vectors).
 */
#include "km_lanes_avx2.h"
#include "residual_add_rmsnorm_body.h"

void km_residual_add_rmsnorm_f32__avx2(float *y, float *h, const float *a, const float *b, const float *w, int64_t M,
                                       int64_t N, float eps, int ith, int nth) {
    kfr_residual_add_rmsnorm(y, h, a, b, w, M, N, eps, ith, nth, KFR_F32);
}
