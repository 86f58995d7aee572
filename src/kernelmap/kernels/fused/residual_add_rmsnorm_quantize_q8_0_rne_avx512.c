/* fused/residual_add_rmsnorm_quantize_q8_0_rne_avx512.c — km_residual_add_rmsnorm_quantize_q8_0_rne__avx512:
 * contract residual_add_rmsnorm_quantize.q8_0.rne.v1.
 *
 * An instantiation of the family body fused/residual_add_rmsnorm_body.h (byte-identical to
 * km_residual_add_rmsnorm_quantize_q8_0_rne__ref for every (ith, nth), and so to the other ISAs'
 * instantiations) on the AVX-512 F/BW/VL/DQ lanes (16-lane zmm vectors).
 */
#include "km_lanes_avx512.h"
#include "residual_add_rmsnorm_body.h"

void km_residual_add_rmsnorm_quantize_q8_0_rne__avx512(float *y, void *q, const float *a, const float *b,
                                                       const float *w, int64_t M, int64_t N, float eps, int ith,
                                                       int nth) {
    kfr_residual_add_rmsnorm(y, q, a, b, w, M, N, eps, ith, nth, KFR_Q8_0);
}
