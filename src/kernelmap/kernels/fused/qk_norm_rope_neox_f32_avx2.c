/* fused/qk_norm_rope_neox_f32_avx2.c — km_qk_norm_rope_neox_f32__avx2: contract qk_norm_rope.neox.f32.v1.
 *
 * An instantiation of the family body fused/qk_norm_rope_body.h (byte-identical to
 * km_qk_norm_rope_neox_f32__ref for every (ith, nth), and so to the other ISAs' instantiations, libm's
 * cosf/sinf being the same) on the AVX2 + FMA + F16C lanes (8-lane ymm vectors).
 */
#include "km_lanes_avx2.h"
#include "qk_norm_rope_body.h"

void km_qk_norm_rope_neox_f32__avx2(float *y, const float *x, const float *w, int64_t M, int64_t H, int64_t D,
                                    int64_t pos, float eps, float freq_base, float freq_scale, int ith, int nth) {
    kqnr_qk_norm_rope_neox(y, x, w, M, H, D, pos, eps, freq_base, freq_scale, ith, nth);
}
