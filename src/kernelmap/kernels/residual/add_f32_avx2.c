/* residual/add_f32_avx2.c — km_residual_add_f32__avx2: contract residual_add.f32.v1.
 *
 * An instantiation of the family body residual/residual_body.h (byte-identical to km_residual_add_f32__ref
 * for every (ith, nth), and so to the other ISAs' instantiations) on the AVX2 + FMA + F16C lanes (8-lane
 * ymm vectors).
 */
#include "km_lanes_avx2.h"

#define KRS_UNROLL 4            /* vectors per copy step (residual_save) */

#include "residual_body.h"

void km_residual_add_f32__avx2(float *y, const float *a, const float *b, int64_t M, int64_t N, int ith, int nth) {
    kres_add(y, a, b, M, N, ith, nth);
}
