/* linear/q4_0_q8_0_ggml_avx2.c — km_linear_q4_0_q8_0_ggml__avx2: contract linear.q4_0.q8_0.ggml.v1.
 *
 * An instantiation of the family bodies linear/q32_cols_ggml_body.h (N % 8 == 0) and linear/q32_ggml_body.h
 * (otherwise); numerics and the exactness argument are there. Byte-identical to
 * km_linear_q4_0_q8_0_ggml__ref for every (ith, nth) and M, on the AVX2 + FMA + F16C lanes (one ymm per
 * contract vector; a row pair is two ymm).
 */
#include "km_lanes_avx2.h"

#define KQ32_TT 4      /* activation rows per prefill tile */
#define KQ32_TREG 2    /* tiles up to this many rows keep their t vectors in registers */
#define KQ32_RP 1      /* weight row pairs per prefill tile */
#define KQ32_R1 2      /* decode: weight rows per step */
#define KQ32_PF 8192   /* prefetch distance in bytes (to L2) */
#define KQ32_PFG 1     /* decode: prefetch distance in 8-row groups (to L2; 1: 262144x640 at 2 threads 14 -> 23-25 GB/s, Zen 3) */
#define KQ32_PFT 4     /* prefill: prefetch distance in weight rows */
#define KQ32_KS 64     /* blocks per K slice */
#define KQ32_NC 128    /* columns per chunk */
#define KQ32G_NG 1     /* prefill GEMM: 8-column groups per panel (16 ymm: one group's 8 accumulators) */
#define KQ32G_MT1 4    /* prefill GEMM: activation rows per register tile (q4_0's repacked order) */
#define KQ32G_KB 32    /* prefill GEMM: blocks per weight panel */
#define KQ32G_MS 64    /* prefill GEMM: rows per super-tile (K of several panels) */
#define KQ32G_MIN_M 16 /* prefill GEMM: smallest batch */
#include "q32_cols_ggml_body.h"

void km_linear_q4_0_q8_0_ggml__avx2(float *y, const void *w, const void *x, int64_t M, int64_t N, int64_t K, int ith,
                                    int nth) {
    kq32_linear_q4_0(y, w, x, M, N, K, ith, nth);
}
