/* residual/save_copy_avx512.c — km_residual_save_copy__avx512: contract residual_save.copy.v1.
 *
 * An instantiation of the family body residual/residual_body.h (byte-identical to
 * km_residual_save_copy__ref for every (ith, nth), and so to the other ISAs' instantiations) on the
 * AVX-512 F/BW/VL/DQ lanes (16-lane zmm vectors).
 */
#include "km_lanes_avx512.h"

#define KRS_UNROLL 2            /* vectors per copy step (residual_save) */

#include "residual_body.h"

void km_residual_save_copy__avx512(float *y, const float *x, int64_t M, int64_t N, int ith, int nth) {
    kres_copy(y, x, M, N, ith, nth);
}
