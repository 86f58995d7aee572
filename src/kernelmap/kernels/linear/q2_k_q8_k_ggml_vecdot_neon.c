/* linear/q2_k_q8_k_ggml_vecdot_neon.c — km_linear_q2_k_q8_k_ggml_vecdot__neon: contract linear.q2_k.q8_k.ggml_vecdot.v1.
 *
 * An instantiation of the family body linear/q_k_vecdot_ggml_body.h at its q2_K format (numerics there, the
 * order linear/q2_k_vecdot_ref.h states; byte-identical to km_linear_q2_k_q8_k_ggml_vecdot__ref, and so to every
 * other variant, for every (ith, nth) and M, at every N) on
 * the AArch64 AdvSIMD lanes (a contract vector is two q registers; vmull_s8 integer dots).
 */
#include "km_lanes_neon.h"

#define KQV_MT 4        /* largest activation-row tile */
#define KQV_CHUNK 65536 /* bytes of weights per column chunk */
#define KQV_PF 4096     /* prefetch distance in bytes (to L2) */
#include "q_k_vecdot_ggml_body.h"

void km_linear_q2_k_q8_k_ggml_vecdot__neon(float *y, const void *w, const void *x, int64_t M, int64_t N, int64_t K, int ith,
                                         int nth) {
    kqv_linear(y, w, x, M, N, K, ith, nth, KL_KQ_Q2_K);
}
