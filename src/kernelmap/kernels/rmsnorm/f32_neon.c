/* rmsnorm/f32_neon.c — km_rmsnorm_f32__neon: contract rmsnorm.f32.v1.
 *
 * An instantiation of the family body rmsnorm/rmsnorm_body.h (byte-identical to km_rmsnorm_f32__ref for
 * every (ith, nth), and so to the other ISAs' instantiations) on the AArch64 AdvSIMD lanes (4-lane q
 * registers).
 */
#include "km_lanes_neon.h"
#include "rmsnorm_body.h"

void km_rmsnorm_f32__neon(float *y, const float *x, const float *w, int64_t M, int64_t N, float eps, int ith, int nth) {
    krms_rmsnorm(y, x, w, M, N, eps, ith, nth);
}
