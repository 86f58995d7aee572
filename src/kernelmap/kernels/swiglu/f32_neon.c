/* swiglu/f32_neon.c — km_swiglu_f32__neon: contract swiglu.f32.v1.
 *
 * An instantiation of the family body swiglu/swiglu_body.h (its vector exp keeps it within the map's
 * tolerance of km_swiglu_f32__ref; byte-identical to the other ISAs' instantiations for every (ith, nth))
 * on the AArch64 AdvSIMD lanes (4-lane q registers).
 */
#include "km_lanes_neon.h"
#include "swiglu_body.h"

void km_swiglu_f32__neon(float *y, const float *gate, const float *up, int64_t M, int64_t F, int ith, int nth) {
    ksw_swiglu_rows(y, gate, up, M, F, ith, nth);
}
