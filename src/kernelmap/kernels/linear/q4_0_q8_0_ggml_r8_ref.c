/* linear/q4_0_q8_0_ggml_r8_ref.c — km_linear_q4_0_q8_0_ggml_r8__ref: the scalar oracle of contract
 * linear.q4_0.q8_0.ggml.v1 on weights in the repacked layout "q32_r8".
 *
 * Same op and numerics as linear/q4_0_q8_0_ggml_ref.c (llama.cpp's x86 q4_0 arithmetic, two orders chosen by
 * N, the weight's row count; w = nibble - 8, t = f32(fp16(w.d) * fp16(x.d)) per block):
 * - N % 8 == 0 (llama.cpp's repacked ggml_gemv_q4_0_8x8_q8_0): per output acc = +0; per block in order
 *   isum = the exact int32 sum of the 32 products, acc = fmaf((float)isum, t, acc); y = acc.
 * - otherwise (vec_dot_q4_0_q8_0): acc[0..7] = +0; per block in order lane[l] = the exact int32 sum of the 4
 *   products at 4l..4l+3, acc[l] = fmaf(t, (float)lane[l], acc[l]); then the fold l + (l + 4), 0 + 2 / 1 + 3,
 *   0 + 1.
 * Only where a weight's bytes are differs: w is "q32_r8" (weights/repack.py states it): rows in groups of 8
 * (ceil(N / 8) groups, pad rows zero), each group K / 64 tiles of 288 bytes for blocks 2j, 2j + 1: [0, 16) the
 * 8 rows' d of block 2j, [16, 32) of block 2j + 1, then row r's 32 nibble bytes at 32 + 32 r (low nibble: block
 * 2j's value i, high nibble: block 2j + 1's). K must be a multiple of 64. Partition: groups of 8 output columns
 * (km_part over the groups); no output depends on (ith, nth) or M. Tests: this ref equals the GGUF-layout ref on
 * the same values for every shape (both orders), and every SIMD variant equals this ref
 * (tests/kernels/test_linear_q32_r8.py).
 */
#include <math.h>

#include "km_common.h"

#define R8_TILE 288 /* 8 rows x 2 blocks x 18 bytes */

/* Row r's 32 signed weights of block p (0: the tile's first block, 1: its second). */
static void unpack(const uint8_t *tile, int r, int p, int8_t q[32]) {
    const uint8_t *nib = tile + 32 + 32 * r;
    for (int i = 0; i < 32; i++) q[i] = (int8_t)((p ? nib[i] >> 4 : nib[i] & 0x0F) - 8);
}

void km_linear_q4_0_q8_0_ggml_r8__ref(float *y, const void *w, const void *x, int64_t M, int64_t N, int64_t K,
                                      int ith, int nth) {
    const int64_t nb = K / 32, ng = (N + 7) / 8;
    int64_t lo, hi;
    km_part(ng, ith, nth, &lo, &hi);
    const uint8_t *wb = (const uint8_t *)w;
    const km_block_q8_0 *xb = (const km_block_q8_0 *)x;
    for (int64_t g = lo; g < hi; g++) {
        for (int r = 0; r < 8 && g * 8 + r < N; r++) {
            const int64_t n = g * 8 + r;
            for (int64_t m = 0; m < M; m++) {
                float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
                float chain = 0.0f;
                for (int64_t b = 0; b < nb; b++) {
                    const uint8_t *tile = wb + (g * (nb / 2) + b / 2) * R8_TILE;
                    const int p = (int)(b & 1);
                    const km_block_q8_0 *xk = &xb[m * nb + b];
                    km_half d;
                    memcpy(&d, tile + 16 * p + 2 * r, 2);
                    int8_t q[32];
                    unpack(tile, r, p, q);
                    const float t = km_fp16_to_fp32(d) * km_fp16_to_fp32(xk->d);
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
                    const float g0 = h[0] + h[2];
                    const float g1 = h[1] + h[3];
                    y[m * N + n] = g0 + g1;
                }
            }
        }
    }
}
