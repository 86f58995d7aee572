/* linear/q4_k_q8_k_avx512.c — km_linear_q4_k_q8_k__avx512: contract linear.q4_k.q8_k.f32.v1.
 *
 * An instantiation of the family body linear/kq_body.h (numerics are there; byte-identical to
 * km_linear_q4_k_q8_k__ref for every (ith, nth) and M) on the AVX-512 lanes.
 */
#include "km_lanes_avx512.h"

#define KQK_T 4         /* activation rows per tile */
#include "kq_body.h"

void km_linear_q4_k_q8_k__avx512(float *y, const void *w, const void *x, int64_t M, int64_t N, int64_t K, int ith,
                                 int nth) {
    kqk_linear(y, w, x, M, N, K, ith, nth, KL_KQ_Q4_K);
}
