/* linear/q4_k_q8_k_ggml_avx512vnni.c — km_linear_q4_k_q8_k_ggml__avx512vnni: contract linear.q4_k.q8_k.ggml.v1.
 *
 * An instantiation of the family body linear/q_k_repack_ggml_body.h (numerics there; byte-identical to
 * km_linear_q4_k_q8_k_ggml__ref, and so to every other variant, for every (ith, nth) and M) on
 * the AVX-512 lanes with VNNI (vpmaddubsw then one vpdpwssd per 64 values); batches of 16+ rows take
 * the register-blocked GEMM of linear/q_k_gemm_body.h (vpdpbusd per 4 values of 16 columns).
 */
#include "km_lanes_avx512.h"

#define KQR_MT 8 /* largest activation-row tile */
#define KQR_BC 8 /* superblocks per chunk */
#define KQR_BC1 4 /* M = 1: superblocks per chunk (4: +7-19% over 8 with the weights in L2, cold unchanged) */
#define KQR_PF 1 /* prefetch the next 8-column group's blocks (to L2) */
#define KQV_MT 8        /* N % 8 != 0 (vec_dot order): largest activation-row tile */
#define KQV_CHUNK 65536 /* N % 8 != 0: bytes of weights per column chunk */
#define KQV_PF 8192     /* N % 8 != 0: prefetch distance in bytes (to L2) */
#define KQG_MT 8        /* prefill GEMM: activation rows per register tile */
#define KQG_KB 8        /* prefill GEMM: superblocks per weight panel */
#define KQG_FA 1152     /* prefill GEMM: float accumulator rows (9 x 128: a 128-row batch is one super-tile) */
#define KQG_MIN_M 16    /* prefill GEMM: smallest batch */
#include "q_k_repack_ggml_body.h"

void km_linear_q4_k_q8_k_ggml__avx512vnni(float *y, const void *w, const void *x, int64_t M, int64_t N, int64_t K, int ith, int nth) {
    kqr_linear(y, w, x, M, N, K, ith, nth, KL_KQ_Q4_K);
}
