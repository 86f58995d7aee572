/* argmax/f32_neon.c — km_argmax_f32__neon: contract argmax.f32.v1.
 *
 * An instantiation of the family body argmax/argmax_body.h (byte-identical to km_argmax_f32__ref for every
 * (ith, nth), and so to the other ISAs' instantiations) on the AArch64 AdvSIMD lanes (4-lane q registers).
 */
#include "km_lanes_neon.h"
#include "argmax_body.h"

void km_argmax_f32__neon(int32_t *y, const float *x, int64_t M, int64_t N, int ith, int nth) {
    kam_argmax(y, x, M, N, ith, nth);
}
