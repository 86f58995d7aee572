/* linear/q4_0_q8_0_neon.c — km_linear_q4_0_q8_0__neon: contract linear.q4_0.q8_0.f32.v1.
 *
 * An instantiation of the family body linear/q32_body.h (numerics and the exactness argument are
 * there; byte-identical to km_linear_q4_0_q8_0__ref for every (ith, nth) and M) on
 * the AArch64 AdvSIMD lanes (armv8-a).
 */
#include "km_lanes_neon.h"

#define Q32K_RP 1       /* weight row pairs per tile */
#define Q32K_TT 4       /* activation rows per prefill tile */
#define Q32K_PF 0       /* prefetch distance in bytes (to L2; 0: none) */
#define Q32K_KS 32      /* blocks per K slice */
#define Q32K_NC 64      /* columns per chunk */
#include "q32_body.h"

void km_linear_q4_0_q8_0__neon(float *y, const void *w, const void *x, int64_t M, int64_t N, int64_t K, int ith,
                               int nth) {
    q32k_linear(y, w, x, M, N, K, ith, nth, KL_Q32_Q4_0);
}
