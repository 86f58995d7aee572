/* linear/q4_1_q8_1_ggml_r8_avx2.c — km_linear_q4_1_q8_1_ggml_r8__avx2: contract
 * linear.q4_1.q8_1.ggml.v1 on weights in the repacked layout "q32_r8".
 *
 * An instantiation of the family body linear/q32_r8_body.h (layout, numerics and the exactness argument are
 * there; byte-identical to km_linear_q4_1_q8_1_ggml__ref on the plain layout for every (ith, nth) and M)
 * on AVX2 + FMA + F16C: dots by vpmaddubsw / vpmaddwd converted as they are (no code offset: no seed), the
 * 8 rows' min chains as one vector fma per block. Hot, one thread, Zen 3: 2048 x 640 34.2 GMAC/s, 640 x 2048 38.5;
 * GGUF layout 17.7, 18.9.
 */
#include "km_lanes_avx2.h"

#define KQR8_PF 4096 /* prefetch distance in bytes (to L2): q5_0's; 2-12 KB within the run-to-run spread here */
#define KQR8_KS 256  /* blocks per K slice: K <= 8192 in one slice */
#define KQR8_NC 16   /* groups per chunk when sliced */
/* the prefill GEMM (linear/q32_gemm_body.h, panels unpacked from q32_r8): q4_1_q8_1_ggml_avx2.c's schedule */
#define KQ32G_NG 1     /* prefill GEMM: 8-column groups per panel (16 ymm: one group's 8 accumulators) */
#define KQ32G_MT1 4    /* prefill GEMM: activation rows per register tile (q4_0's repacked order) */
#define KQ32G_KB 32    /* prefill GEMM: blocks per weight panel */
#define KQ32G_MS 64    /* prefill GEMM: rows per super-tile (K of several panels) */
#define KQ32G_MIN_M 16 /* prefill GEMM: smallest batch */
#include "q32_r8_body.h"

void km_linear_q4_1_q8_1_ggml_r8__avx2(float *y, const void *w, const void *x, int64_t M, int64_t N, int64_t K,
                                       int ith, int nth) {
    kqr8_linear(y, w, x, M, N, K, ith, nth, KL_Q32_Q4_1);
}
