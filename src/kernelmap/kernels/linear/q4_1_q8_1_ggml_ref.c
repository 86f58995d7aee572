/* linear/q4_1_q8_1_ggml_ref.c — km_linear_q4_1_q8_1_ggml__ref: the scalar oracle of linear.q4_1.q8_1.ggml.v1.
 *
 * Op: y[m][n] = sum_k dequant(w[n])[k] * dequant(x[m])[k]; w [N,K] q4_1 in ggml_blocks (one row of K/32
 * blocks of 20 bytes per output column: f16 d, f16 m, qs[16]; value = d * w + m), x [M,K] q8_1 rows
 * (blocks of 36 bytes: f16 d, f16 s, int8 qs[32] in [-127, 127], s = d * sum(qs) as quantize_act_q8_1_rne
 * writes them), y [M,N] f32 row-major. K must be a multiple of 32.
 * Numerics (llama.cpp's x86 vec_dot_q4_1_q8_1 order; every variant is bit-exact with this file):
 * acc[0..7] = +0 and summs = +0; for each block b in increasing order: lane[l] = exact int32 sum of the
 * 4 products w[4l+i] * x[4l+i], i = 0..3 (w = the nibble, in [0, 15]); t = f32(fp16(w.d) * fp16(x.d));
 * acc[l] = fmaf(t, (float)lane[l], acc[l]); summs = fmaf(fp16(w.m), fp16(x.s), summs) (an fma in
 * llama.cpp's binary). Then h[l] = acc[l] + acc[l+4] (l < 4), g0 = h0 + h2, g1 = h1 + h3,
 * y = (g0 + g1) + summs, each an f32 add. FMA is part of the contract.
 * Partition: output columns n (km_part over N); results are identical for every (ith, nth) and M.
 */
#include <math.h>

#include "km_common.h"

enum { WBLK = 20, XBLK = 36 };

static float half_at(const uint8_t *p) {
    km_half h;
    memcpy(&h, p, 2);
    return km_fp16_to_fp32(h);
}

/* The 32 unsigned integer weights of one block. */
static void unpack(const uint8_t *blk, int32_t q[32]) {
    for (int i = 0; i < 16; i++) {
        q[i] = blk[4 + i] & 0x0F;
        q[i + 16] = blk[4 + i] >> 4;
    }
}

void km_linear_q4_1_q8_1_ggml__ref(float *y, const void *w, const void *x, int64_t M, int64_t N, int64_t K,
                                   int ith, int nth) {
    int64_t lo, hi;
    km_part(N, ith, nth, &lo, &hi);
    const int64_t nb = K / 32;
    const uint8_t *wb = (const uint8_t *)w;
    const uint8_t *xb = (const uint8_t *)x;
    for (int64_t n = lo; n < hi; n++) {
        for (int64_t m = 0; m < M; m++) {
            float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
            float summs = 0.0f;
            for (int64_t b = 0; b < nb; b++) {
                const uint8_t *wk = wb + (n * nb + b) * WBLK;
                const uint8_t *xk = xb + (m * nb + b) * XBLK;
                const int8_t *xq = (const int8_t *)(xk + 4);
                int32_t q[32];
                unpack(wk, q);
                const float t = half_at(wk) * half_at(xk);
                for (int l = 0; l < 8; l++) {
                    int32_t lane = 0;
                    for (int i = 0; i < 4; i++) lane += q[4 * l + i] * (int32_t)xq[4 * l + i];
                    acc[l] = fmaf(t, (float)lane, acc[l]);
                }
                summs = fmaf(half_at(wk + 2), half_at(xk + 2), summs);
            }
            float h[4];
            for (int l = 0; l < 4; l++) h[l] = acc[l] + acc[l + 4];
            y[m * N + n] = ((h[0] + h[2]) + (h[1] + h[3])) + summs;
        }
    }
}
