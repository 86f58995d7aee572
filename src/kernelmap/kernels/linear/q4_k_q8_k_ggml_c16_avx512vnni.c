/* linear/q4_k_q8_k_ggml_c16_avx512vnni.c — km_linear_q4_k_q8_k_ggml_c16__avx512vnni: contract
 * linear.q4_k.q8_k.ggml.v1 (N % 8 == 0) on weights in the repacked layout "q4_k_c16".
 *
 * An instantiation of the family body linear/qk_c16_body.h (layout, numerics and exactness there; byte-identical
 * to km_linear_q4_k_q8_k_ggml_c16__ref for every (ith, nth) and M) on the AVX-512 lanes with VNNI: per superblock
 * and 16 rows, 64 vpdpbusd on the masked nibbles of 32 stored code vectors; batches of 16+ rows take
 * linear/q_k_gemm_body.h's GEMM with q4_k_q8_k_ggml_avx512vnni.c's schedule on panels loaded from this layout.
 */
#include "km_lanes_avx512.h"

#define KQC16K_PF 8192 /* decode: prefetch distance in bytes (to L2): from DRAM on Zen 4 over 4096, +1-7% */
#define KQG_MT 8        /* prefill GEMM: activation rows per register tile */
#define KQG_KB 8        /* prefill GEMM: superblocks per weight panel */
#define KQG_FA 1152     /* prefill GEMM: float accumulator rows (9 x 128: a 128-row batch is one super-tile) */
#define KQG_MIN_M 16    /* prefill GEMM: smallest batch */
#include "qk_c16_body.h"

void km_linear_q4_k_q8_k_ggml_c16__avx512vnni(float *y, const void *w, const void *x, int64_t M, int64_t N, int64_t K,
                                              int ith, int nth) {
    kqc16k_linear(y, w, x, M, N, K, ith, nth, KL_KQ_Q4_K);
}
