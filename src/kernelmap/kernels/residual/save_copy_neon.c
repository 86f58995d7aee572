/* residual/save_copy_neon.c — km_residual_save_copy__neon: contract residual_save.copy.v1.
 *
 * An instantiation of the family body residual/residual_body.h (byte-identical to
 * km_residual_save_copy__ref for every (ith, nth), and so to the other ISAs' instantiations) on the
 * AArch64 AdvSIMD lanes (4-lane q registers).
 */
#include "km_lanes_neon.h"

#define KRS_UNROLL 4            /* vectors per copy step (residual_save) */

#include "residual_body.h"

void km_residual_save_copy__neon(float *y, const float *x, int64_t M, int64_t N, int ith, int nth) {
    kres_copy(y, x, M, N, ith, nth);
}
