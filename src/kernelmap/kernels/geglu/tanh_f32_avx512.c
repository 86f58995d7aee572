/* geglu/tanh_f32_avx512.c — km_geglu_tanh_f32__avx512: contract geglu.tanh.f32.v1.
 *
 * An instantiation of the family body geglu/geglu_body.h (byte-identical to km_geglu_tanh_f32__ref for
 * every (ith, nth), and so to the other ISAs' instantiations) on the AVX-512 F/BW/VL/DQ lanes (16-lane zmm
 * vectors).
 */
#include "km_lanes_avx512.h"
#include "geglu_body.h"

void km_geglu_tanh_f32__avx512(float *y, const float *gate, const float *up, int64_t M, int64_t F, int ith, int nth) {
    kgg_geglu_rows(y, gate, up, M, F, ith, nth);
}
