/* argmax/f32_avx512.c — km_argmax_f32__avx512: contract argmax.f32.v1.
 *
 * An instantiation of the family body argmax/argmax_body.h (byte-identical to km_argmax_f32__ref for every
 * (ith, nth), and so to the other ISAs' instantiations) on the AVX-512 F/BW/VL/DQ lanes (16-lane zmm
 * vectors).
 */
#include "km_lanes_avx512.h"
#include "argmax_body.h"

void km_argmax_f32__avx512(int32_t *y, const float *x, int64_t M, int64_t N, int ith, int nth) {
    kam_argmax(y, x, M, N, ith, nth);
}
