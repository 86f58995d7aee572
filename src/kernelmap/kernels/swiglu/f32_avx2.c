/* swiglu/f32_avx2.c — km_swiglu_f32__avx2: contract swiglu.f32.v1.
 *
 * An instantiation of the family body swiglu/swiglu_body.h (its vector exp keeps it within the map's
 * tolerance of km_swiglu_f32__ref; byte-identical to the other ISAs' instantiations for every (ith, nth))
 * on the AVX2 + FMA + F16C lanes (8-lane ymm vectors).
 */
#include "km_lanes_avx2.h"
#include "swiglu_body.h"

void km_swiglu_f32__avx2(float *y, const float *gate, const float *up, int64_t M, int64_t F, int ith, int nth) {
    ksw_swiglu_rows(y, gate, up, M, F, ith, nth);
}
