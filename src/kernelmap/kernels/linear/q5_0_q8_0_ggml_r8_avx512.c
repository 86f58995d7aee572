/* linear/q5_0_q8_0_ggml_r8_avx512.c — km_linear_q5_0_q8_0_ggml_r8__avx512: contract linear.q5_0.q8_0.ggml.v1 on
 * weights in the repacked layout "q32_r8".
 *
 * An instantiation of the family body linear/q32_r8_body.h (layout, numerics and the exactness argument are there;
 * byte-identical to km_linear_q5_0_q8_0_ggml__ref on the plain layout for every (ith, nth) and M) on the AVX-512
 * F/BW/VL/DQ lanes, on 256-bit vectors but for the vec_dot order's row pairs (one zmm per two rows, KL_R8P): row r's
 * fifth bits by vptestmb into a mask register and a masked byte add of 16 (two ops per block instead of three), dots
 * by vpmaddubsw / vpmaddwd; with 32 ymm registers the group's 8 accumulators, the tile's H0 / H1 and the activation
 * operands all stay in registers. Measured on Zen 5: linear/q32_r8_body.h.
 */
#include "km_lanes_avx512.h"

#define KQR8_PF 8192 /* prefetch distance in bytes (to L2): over 4096 from DRAM on Zen 4, q4_0 +20%, q5_0 +9% */
#define KQR8_KS 256  /* blocks per K slice: K <= 8192 in one slice */
#define KQR8_NC 16   /* groups per chunk when sliced */
/* the prefill GEMM (linear/q32_gemm_body.h, panels unpacked from q32_r8): q5_0_q8_0_ggml_avx512.c's schedule */
#define KQ32G_NG 2     /* prefill GEMM: 16-column groups per panel */
#define KQ32G_MT1 4    /* prefill GEMM: activation rows per register tile (q4_0's repacked order) */
#define KQ32G_KB 32    /* prefill GEMM: blocks per weight panel */
#define KQ32G_MS 64    /* prefill GEMM: rows per super-tile (K of several panels) */
#define KQ32G_MIN_M 16 /* prefill GEMM: smallest batch */
#include "q32_r8_body.h"

void km_linear_q5_0_q8_0_ggml_r8__avx512(float *y, const void *w, const void *x, int64_t M, int64_t N, int64_t K,
                                         int ith, int nth) {
    kqr8_linear(y, w, x, M, N, K, ith, nth, KL_Q32_Q5_0);
}
