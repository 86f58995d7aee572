/* linear/q4_0_q8_0_ggml_ref.c — km_linear_q4_0_q8_0_ggml__ref: the scalar oracle of linear.q4_0.q8_0.ggml.v1.
 *
 * Op: y[m][n] = sum_k dequant(w[n])[k] * dequant(x[m])[k]; w [N,K] q4_0 in ggml_blocks (one row of K/32
 * blocks per output column), x [M,K] q8_0 rows (quants in [-127, 127], as quantize_act_q8_0_rne writes
 * them), y [M,N] f32 row-major. K must be a multiple of 32.
 * Numerics: llama.cpp's x86 q4_0 arithmetic, which has two orders chosen by N (the weight's row count):
 * - N % 8 == 0: llama.cpp repacks the weight into 8-row interleaved blocks and runs
 *   ggml_gemv_q4_0_8x8_q8_0 (ggml_gemm_q4_0_8x8_q8_0 on 4 activation rows computes the same values):
 *   acc = +0; for each block b in order: isum = exact int32 sum of the 32 products w[i] * x[i]
 *   (w = nibble - 8, in [-8, 7]), t = f32(fp16(w.d) * fp16(x.d)), acc = fmaf((float)isum, t, acc); y = acc.
 * - otherwise vec_dot_q4_0_q8_0: acc[0..7] = +0; per block lane[l] = exact int32 sum of the 4 products
 *   at 4l..4l+3, acc[l] = fmaf(t, (float)lane[l], acc[l]); then h[l] = acc[l] + acc[l+4] (l < 4), g0 = h0 +
 *   h2, g1 = h1 + h3, y = g0 + g1, each an f32 add.
 * FMA is part of the contract; every variant is bit-exact with this file.
 * Partition: output columns n (km_part over N); results are identical for every (ith, nth) and M.
 */
#include <math.h>

#include "km_common.h"

/* The 32 signed integer weights of one block. */
static void unpack(const km_block_q4_0 *blk, int8_t q[32]) {
    for (int i = 0; i < 16; i++) {
        q[i] = (int8_t)((blk->qs[i] & 0x0F) - 8);
        q[i + 16] = (int8_t)((blk->qs[i] >> 4) - 8);
    }
}

void km_linear_q4_0_q8_0_ggml__ref(float *y, const void *w, const void *x, int64_t M, int64_t N, int64_t K,
                                   int ith, int nth) {
    int64_t lo, hi;
    km_part(N, ith, nth, &lo, &hi);
    const int64_t nb = K / 32;
    const km_block_q4_0 *wb = (const km_block_q4_0 *)w;
    const km_block_q8_0 *xb = (const km_block_q8_0 *)x;
    for (int64_t n = lo; n < hi; n++) {
        for (int64_t m = 0; m < M; m++) {
            float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
            float chain = 0.0f;
            for (int64_t b = 0; b < nb; b++) {
                const km_block_q4_0 *wk = &wb[n * nb + b];
                const km_block_q8_0 *xk = &xb[m * nb + b];
                int8_t q[32];
                unpack(wk, q);
                const float t = km_fp16_to_fp32(wk->d) * km_fp16_to_fp32(xk->d);
                int32_t isum = 0;
                for (int l = 0; l < 8; l++) {
                    int32_t lane = 0;
                    for (int i = 0; i < 4; i++) lane += (int32_t)q[4 * l + i] * (int32_t)xk->qs[4 * l + i];
                    acc[l] = fmaf(t, (float)lane, acc[l]);
                    isum += lane;
                }
                chain = fmaf((float)isum, t, chain);
            }
            if (N % 8 == 0) {
                y[m * N + n] = chain;
            } else {
                float h[4];
                for (int l = 0; l < 4; l++) h[l] = acc[l] + acc[l + 4];
                y[m * N + n] = (h[0] + h[2]) + (h[1] + h[3]);
            }
        }
    }
}
