/* linear/q4_1_q8_1_ggml_r8_ref.c — km_linear_q4_1_q8_1_ggml_r8__ref: the scalar oracle of contract
 * linear.q4_1.q8_1.ggml.v1 on weights in the repacked layout "q32_r8".
 *
 * Same op and numerics as linear/q4_1_q8_1_ggml_ref.c (llama.cpp's x86 vec_dot_q4_1_q8_1 order: per output,
 * acc[0..7] = +0 and summs = +0; per block in order lane[l] = the exact int32 sum of the 4 products at
 * 4l..4l+3 (w = the nibble, in [0, 15], x the q8_1 quants), t = f32(fp16(w.d) * fp16(x.d)),
 * acc[l] = fmaf(t, (float)lane[l], acc[l]), summs = fmaf(fp16(w.m), fp16(x.s), summs); then the fold
 * l + (l + 4), 0 + 2 / 1 + 3, 0 + 1, and y = fold + summs). Only where a weight's bytes are differs: w is
 * "q32_r8" (weights/repack.py states it): rows in groups of 8 (ceil(N / 8) groups, pad rows zero), each group
 * K / 64 tiles of 320 bytes for blocks 2j, 2j + 1: [0, 16) the 8 rows' d of block 2j, [16, 32) of block
 * 2j + 1, [32, 48) the 8 rows' m of block 2j, [48, 64) of block 2j + 1, then row r's 32 nibble bytes at 64 + 32 r
 * (low nibble: block 2j's value i, high nibble: block 2j + 1's).
 * K must be a multiple of 64. Partition: groups of 8 output columns (km_part over the groups); no output
 * depends on (ith, nth) or M. Tests: this ref equals the GGUF-layout ref on the same values for every shape,
 * and every SIMD variant equals this ref (tests/kernels/test_linear_q32_r8.py).
 */
#include <math.h>

#include "km_common.h"

enum { R8_TILE = 320, XBLK = 36 }; /* 8 rows x 2 blocks x 20 bytes; the q8_1 activation block */

static float half_at(const uint8_t *p) {
    km_half h;
    memcpy(&h, p, 2);
    return km_fp16_to_fp32(h);
}

/* Row r's 32 unsigned codes of block p (0: the tile's first block, 1: its second). */
static void unpack(const uint8_t *tile, int r, int p, int32_t q[32]) {
    const uint8_t *nib = tile + 64 + 32 * r;
    for (int i = 0; i < 32; i++) q[i] = p ? nib[i] >> 4 : nib[i] & 0x0F;
}

void km_linear_q4_1_q8_1_ggml_r8__ref(float *y, const void *w, const void *x, int64_t M, int64_t N, int64_t K,
                                      int ith, int nth) {
    const int64_t nb = K / 32, ng = (N + 7) / 8;
    int64_t lo, hi;
    km_part(ng, ith, nth, &lo, &hi);
    const uint8_t *wb = (const uint8_t *)w;
    const uint8_t *xb = (const uint8_t *)x;
    for (int64_t g = lo; g < hi; g++) {
        for (int r = 0; r < 8 && g * 8 + r < N; r++) {
            const int64_t n = g * 8 + r;
            for (int64_t m = 0; m < M; m++) {
                float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
                float summs = 0.0f;
                for (int64_t b = 0; b < nb; b++) {
                    const uint8_t *tile = wb + (g * (nb / 2) + b / 2) * R8_TILE;
                    const int p = (int)(b & 1);
                    const uint8_t *xk = xb + (m * nb + b) * XBLK;
                    const int8_t *xq = (const int8_t *)(xk + 4);
                    int32_t q[32];
                    unpack(tile, r, p, q);
                    const float t = half_at(tile + 16 * p + 2 * r) * half_at(xk);
                    for (int l = 0; l < 8; l++) {
                        int32_t lane = 0;
                        for (int i = 0; i < 4; i++) lane += q[4 * l + i] * (int32_t)xq[4 * l + i];
                        acc[l] = fmaf(t, (float)lane, acc[l]);
                    }
                    summs = fmaf(half_at(tile + 32 + 16 * p + 2 * r), half_at(xk + 2), summs);
                }
                float h[4];
                for (int l = 0; l < 4; l++) h[l] = acc[l] + acc[l + 4];
                const float g0 = h[0] + h[2];
                const float g1 = h[1] + h[3];
                y[m * N + n] = (g0 + g1) + summs;
            }
        }
    }
}
