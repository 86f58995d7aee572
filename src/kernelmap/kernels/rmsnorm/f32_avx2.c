/* rmsnorm/f32_avx2.c — km_rmsnorm_f32__avx2: contract rmsnorm.f32.v1.
 *
 * An instantiation of the family body rmsnorm/rmsnorm_body.h (byte-identical to km_rmsnorm_f32__ref for
 * every (ith, nth), and so to the other ISAs' instantiations) on the AVX2 + FMA + F16C lanes (8-lane ymm
 * vectors).
 */
#include "km_lanes_avx2.h"
#include "rmsnorm_body.h"

void km_rmsnorm_f32__avx2(float *y, const float *x, const float *w, int64_t M, int64_t N, float eps, int ith, int nth) {
    krms_rmsnorm(y, x, w, M, N, eps, ith, nth);
}
