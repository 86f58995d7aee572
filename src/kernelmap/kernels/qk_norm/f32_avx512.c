/* qk_norm/f32_avx512.c — km_qk_norm_f32__avx512: contract qk_norm.f32.v1.
 *
 * An instantiation of the family body qk_norm/qk_norm_body.h (byte-identical to km_qk_norm_f32__ref for
 * every (ith, nth), and so to the other ISAs' instantiations) on the AVX-512 F/BW/VL/DQ lanes (16-lane zmm
 * vectors).
 */
#include "km_lanes_avx512.h"
#include "qk_norm_body.h"

void km_qk_norm_f32__avx512(float *y, const float *x, const float *w, int64_t M, int64_t H, int64_t D, float eps,
                            int ith, int nth) {
    kqkn_qk_norm(y, x, w, M, H, D, eps, ith, nth);
}
