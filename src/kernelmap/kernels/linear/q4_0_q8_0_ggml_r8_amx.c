/* linear/q4_0_q8_0_ggml_r8_amx.c — km_linear_q4_0_q8_0_ggml_r8__amx: contract linear.q4_0.q8_0.ggml.v1 on weights
 * in the repacked layout "q32_r8".
 *
 * The avx512vnni instantiation of linear/q32_r8_body.h with the AMX-INT8 lanes (km_lanes_avx512_amx.h): prefill
 * batches with N % 8 == 0 (llama.cpp's repacked order, one chain of whole-block sums per output) run their rows in
 * tiles of 16 on the tile unit (linear/q32_gemm_body.h, kq32g_ttile); decode, the vec_dot order (N % 8 != 0), the
 * rows past the last 16 and a refused tile state are the avx512vnni variant's code. Byte-identical to
 * km_linear_q4_0_q8_0_ggml__ref on the plain layout for every (ith, nth) and M (the kernel tests compare them).
 */
#include "km_lanes_avx512_amx.h"

#define KQR8_PF 8192   /* prefetch distance in bytes (to L2) */
#define KQR8_KS 256    /* blocks per K slice */
#define KQR8_NC 16     /* groups per chunk when sliced */
#define KQ32G_NG 2     /* prefill GEMM: 16-column groups per panel */
#define KQ32G_MT1 4    /* prefill GEMM: activation rows per register tile (the rows past the last 16) */
#define KQ32G_KB 32    /* prefill GEMM: blocks per weight panel */
#define KQ32G_MS 64    /* prefill GEMM: rows per super-tile (K of several panels) */
#define KQ32G_MIN_M 16 /* prefill GEMM: smallest batch */
#include "q32_r8_body.h"

void km_linear_q4_0_q8_0_ggml_r8__amx(float *y, const void *w, const void *x, int64_t M, int64_t N, int64_t K, int ith,
                                      int nth) {
    kqr8_linear(y, w, x, M, N, K, ith, nth, KL_Q32_Q4_0);
}
