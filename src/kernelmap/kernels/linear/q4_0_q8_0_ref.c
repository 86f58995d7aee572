/* linear/q4_0_q8_0_ref.c — km_linear_q4_0_q8_0__ref: the scalar oracle of linear.q4_0.q8_0.f32.v1.
 *
 * Op: y[m][n] = sum_k dequant(w[n])[k] * dequant(x[m])[k]; w [N,K] q4_0 in ggml_blocks (one row of
 * K/32 blocks per output column), x [M,K] q8_0 rows (as quantize_act_q8_0 writes them, quants in
 * [-127, 127]), y [M,N] f32 row-major. K must be a multiple of 32 (no tails inside a row).
 * Numerics (the contract, shared by every variant, bit-exact): for block b, isum_b = exact int32
 * sum of the 32 products of the integer quants
 * (q4_0: nibble - 8, low nibbles are elements 0..15); t_b = fp16(w.d) * fp16(x.d) in f32;
 * p[b mod 8] = fmaf(t_b, (float)isum_b, p[b mod 8]), b increasing, p starting at +0; then
 * y = ((p0 + p4) + (p2 + p6)) + ((p1 + p5) + (p3 + p7)). FMA is part of the contract.
 * Partition: output columns n (km_part over N); results are identical for every (ith, nth).
 */
#include <math.h>

#include "km_common.h"
#include "km_simd.h"

/* The 32 signed integer weights of one block. */
static void unpack(const km_block_q4_0 *blk, int8_t q[32]) {
    for (int i = 0; i < 16; i++) {
        q[i] = (int8_t)((blk->qs[i] & 0x0F) - 8);
        q[i + 16] = (int8_t)((blk->qs[i] >> 4) - 8);
    }
}

void km_linear_q4_0_q8_0__ref(float *y, const void *w, const void *x, int64_t M, int64_t N, int64_t K,
                            int ith, int nth) {
    int64_t lo, hi;
    km_part(N, ith, nth, &lo, &hi);
    const int64_t nb = K / 32;
    const km_block_q4_0 *wb = (const km_block_q4_0 *)w;
    const km_block_q8_0 *xb = (const km_block_q8_0 *)x;
    for (int64_t n = lo; n < hi; n++) {
        for (int64_t m = 0; m < M; m++) {
            float p[8] = {0, 0, 0, 0, 0, 0, 0, 0};
            for (int64_t b = 0; b < nb; b++) {
                const km_block_q4_0 *wk = &wb[n * nb + b];
                const km_block_q8_0 *xk = &xb[m * nb + b];
                int8_t q[32];
                unpack(wk, q);
                int32_t isum = 0;
                for (int i = 0; i < 32; i++) isum += (int32_t)q[i] * (int32_t)xk->qs[i];
                const float t = km_fp16_to_fp32(wk->d) * km_fp16_to_fp32(xk->d);
                p[b & 7] = fmaf(t, (float)isum, p[b & 7]);
            }
            y[m * N + n] = km_tree8(p);
        }
    }
}
