/* linear/f32_f32_avx2.c — km_linear_f32_f32__avx2: contract linear.f32.f32.f32.v1.
 *
 * An instantiation of the family body linear/f16p_body.h (numerics are there; byte-identical to
 * km_linear_f32_f32__ref for every (ith, nth) and M) on the AVX2 lanes (16 partials = two ymm).
 */
#include "km_lanes_avx2.h"

#define KF16_R 4        /* weight rows per tile */
#define KF16_T 1        /* activation rows per tile */
#include "f16p_body.h"

void km_linear_f32_f32__avx2(float *y, const float *w, const float *x, int64_t M, int64_t N, int64_t K, int ith, int nth) {
    kf16_linear(y, w, x, M, N, K, ith, nth, KF16_F32);
}
