/* linear/q5_0_q8_0_ggml_ref.c — km_linear_q5_0_q8_0_ggml__ref: the scalar oracle of linear.q5_0.q8_0.ggml.v1.
 *
 * Op: y[m][n] = sum_k dequant(w[n])[k] * dequant(x[m])[k]; w [N,K] q5_0 in ggml_blocks (one row of
 * K/32 blocks per output column), x [M,K] q8_0 rows (quants in [-127, 127], as quantize_act_q8_0
 * writes them), y [M,N] f32 row-major. K must be a multiple of 32 (no tails inside a row).
 * Numerics (llama.cpp's x86 vec_dot_q5_0_q8_0 order; every variant is bit-exact with this file):
 * acc[0..7] = +0; for each block b in increasing order: lane[l] = exact int32 sum of the 4 products
 * w[4l+i] * x[4l+i], i = 0..3 (w = (nibble | qh bit << 4) - 16, in [-16, 15]); t = f32(fp16(w.d) *
 * fp16(x.d));
 * acc[l] = fmaf(t, (float)lane[l], acc[l]). Then h[l] = acc[l] + acc[l+4] (l < 4), g0 = h0 + h2,
 * g1 = h1 + h3, y = g0 + g1, each an f32 add. FMA is part of the contract.
 * Partition: output columns n (km_part over N); results are identical for every (ith, nth) and M.
 */
#include <math.h>

#include "km_common.h"

/* The 32 signed integer weights of one block. */
static void unpack(const km_block_q5_0 *blk, int8_t q[32]) {
    uint32_t qh;
    memcpy(&qh, blk->qh, 4);
    for (int i = 0; i < 16; i++) {
        q[i] = (int8_t)(((blk->qs[i] & 0x0F) | (((qh >> i) & 1u) << 4)) - 16);
        q[i + 16] = (int8_t)(((blk->qs[i] >> 4) | (((qh >> (i + 16)) & 1u) << 4)) - 16);
    }
}

void km_linear_q5_0_q8_0_ggml__ref(float *y, const void *w, const void *x, int64_t M, int64_t N, int64_t K,
                                   int ith, int nth) {
    int64_t lo, hi;
    km_part(N, ith, nth, &lo, &hi);
    const int64_t nb = K / 32;
    const km_block_q5_0 *wb = (const km_block_q5_0 *)w;
    const km_block_q8_0 *xb = (const km_block_q8_0 *)x;
    for (int64_t n = lo; n < hi; n++) {
        for (int64_t m = 0; m < M; m++) {
            float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
            for (int64_t b = 0; b < nb; b++) {
                const km_block_q5_0 *wk = &wb[n * nb + b];
                const km_block_q8_0 *xk = &xb[m * nb + b];
                int8_t q[32];
                unpack(wk, q);
                const float t = km_fp16_to_fp32(wk->d) * km_fp16_to_fp32(xk->d);
                for (int l = 0; l < 8; l++) {
                    int32_t lane = 0;
                    for (int i = 0; i < 4; i++) lane += (int32_t)q[4 * l + i] * (int32_t)xk->qs[4 * l + i];
                    acc[l] = fmaf(t, (float)lane, acc[l]);
                }
            }
            float h[4];
            for (int l = 0; l < 4; l++) h[l] = acc[l] + acc[l + 4];
            const float g0 = h[0] + h[2];
            const float g1 = h[1] + h[3];
            y[m * N + n] = g0 + g1;
        }
    }
}
