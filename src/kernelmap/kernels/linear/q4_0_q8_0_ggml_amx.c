/* linear/q4_0_q8_0_ggml_amx.c — km_linear_q4_0_q8_0_ggml__amx: contract linear.q4_0.q8_0.ggml.v1.
 *
 * The avx512vnni instantiation of linear/q32_cols_ggml_body.h (N % 8 == 0) and linear/q32_ggml_body.h (otherwise)
 * with the AMX-INT8 lanes (km_lanes_avx512_amx.h): prefill batches in llama.cpp's repacked order (N % 8 == 0, one
 * chain of whole-block sums per output) run their rows in tiles of 16 on the tile unit (linear/q32_gemm_body.h,
 * kq32g_ttile); decode, the vec_dot order, the rows past the last 16 and a refused tile state are the avx512vnni
 * variant's code. Byte-identical to km_linear_q4_0_q8_0_ggml__ref for every (ith, nth) and M (the kernel tests
 * compare them).
 */
#include "km_lanes_avx512_amx.h"

#define KQ32_TT 16     /* activation rows per prefill tile */
#define KQ32_TREG 2    /* tiles up to this many rows keep their t vectors in registers */
#define KQ32_RP 1      /* weight row pairs per prefill tile */
#define KQ32_R1 4      /* decode: weight rows per step */
#define KQ32_PF 8192   /* prefetch distance in bytes (to L2) */
#define KQ32_PFT 4     /* prefill: prefetch distance in weight rows */
#define KQ32_KS 64     /* blocks per K slice */
#define KQ32_NC 128    /* columns per chunk */
#define KQ32G_NG 2     /* prefill GEMM: 16-column groups per panel */
#define KQ32G_MT1 4    /* prefill GEMM: activation rows per register tile (the rows past the last 16) */
#define KQ32G_KB 32    /* prefill GEMM: blocks per weight panel */
#define KQ32G_MS 64    /* prefill GEMM: rows per super-tile (K of several panels) */
#define KQ32G_MIN_M 16 /* prefill GEMM: smallest batch */
#include "q32_cols_ggml_body.h"

void km_linear_q4_0_q8_0_ggml__amx(float *y, const void *w, const void *x, int64_t M, int64_t N, int64_t K, int ith,
                                   int nth) {
    kq32_linear_q4_0(y, w, x, M, N, K, ith, nth);
}
