/* qk_norm/f32_neon.c — km_qk_norm_f32__neon: contract qk_norm.f32.v1.
 *
 * An instantiation of the family body qk_norm/qk_norm_body.h (byte-identical to km_qk_norm_f32__ref for
 * every (ith, nth), and so to the other ISAs' instantiations) on the AArch64 AdvSIMD lanes (4-lane q
 * registers).
 */
#include "km_lanes_neon.h"
#include "qk_norm_body.h"

void km_qk_norm_f32__neon(float *y, const float *x, const float *w, int64_t M, int64_t H, int64_t D, float eps,
                          int ith, int nth) {
    kqkn_qk_norm(y, x, w, M, H, D, eps, ith, nth);
}
