/* linear/f32_f32_neon.c — km_linear_f32_f32__neon: contract linear.f32.f32.f32.v1.
 *
 * An instantiation of the family body linear/f16p_body.h (numerics are there; byte-identical to
 * km_linear_f32_f32__ref for every (ith, nth) and M) on the AArch64 AdvSIMD lanes (armv8-a; 16 partials = four q registers).
 */
#include "km_lanes_neon.h"

#define KF16_R 2        /* weight rows per tile */
#define KF16_T 1        /* activation rows per tile */
#include "f16p_body.h"

void km_linear_f32_f32__neon(float *y, const float *w, const float *x, int64_t M, int64_t N, int64_t K, int ith, int nth) {
    kf16_linear(y, w, x, M, N, K, ith, nth, KF16_F32);
}
