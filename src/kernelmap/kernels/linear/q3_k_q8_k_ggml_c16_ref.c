/* linear/q3_k_q8_k_ggml_c16_ref.c — km_linear_q3_k_q8_k_ggml_c16__ref: the scalar oracle of contract
 * linear.q3_k.q8_k.ggml.v1 (llama.cpp's x86 vec_dot_q3_K_q8_K order) on weights in the repacked layout "q3_k_c16".
 *
 * Same op and numerics as linear/q3_k_q8_k_ggml_ref.c (the superblock's eight int32 lanes stated once in
 * linear/q3_k_vecdot_ref.h, km_q3_k_lanes_ref; per output acc[l] = fmaf(x.d * fp16(d), (float)lane[l], acc[l]) over
 * the superblocks in order, y = km_kq_reduce8(acc)). Only where a weight's bytes are differs: w is "q3_k_c16"
 * (weights/repack.py states it): rows in groups of 16 (ceil(N / 16) groups, pad rows zero bytes), each group K / 256
 * records of 1824 bytes; in record b, row c's qs dword v (v < 16) at 64 v + 4 c, its hmask dword t (t < 8) at
 * 1024 + 64 t + 4 c, its signed scale j at 1536 + 16 j + c, its f16 d at 1792 + 2 c. This file rebuilds each
 * superblock's GGUF block from there (the scales packed back into 6 bits).
 * K must be a multiple of 256 (the map's constraint); every N.
 * Partition: groups of 16 output columns (km_part over the groups); no output depends on (ith, nth) or M.
 * Tests: this ref equals the GGUF-layout ref on the same values, and every SIMD variant equals this ref
 * (tests/kernels/test_linear_qk_c16.py).
 */
#include <math.h>

#include "km_common.h"
#include "km_kquant.h"
#include "q3_k_vecdot_ref.h"

enum { C16 = 16, REC = 1824 }; /* rows per group; bytes per superblock record */

void km_linear_q3_k_q8_k_ggml_c16__ref(float *y, const void *w, const void *x, int64_t M, int64_t N, int64_t K,
                                       int ith, int nth) {
    const int64_t nb = K / KM_QK_K, ng = (N + C16 - 1) / C16;
    int64_t lo, hi;
    km_part(ng, ith, nth, &lo, &hi);
    const uint8_t *wb = (const uint8_t *)w;
    const km_block_q8_k *xq = (const km_block_q8_k *)x;
    for (int64_t g = lo; g < hi; g++) {
        for (int c = 0; c < C16 && g * C16 + c < N; c++) {
            const int64_t n = g * C16 + c;
            for (int64_t m = 0; m < M; m++) {
                float acc[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
                for (int64_t b = 0; b < nb; b++) {
                    const uint8_t *r = wb + (g * nb + b) * REC;
                    const km_block_q8_k *xb = &xq[m * nb + b];
                    km_block_q3_k blk;
                    for (int v = 0; v < 16; v++) memcpy(blk.qs + 4 * v, r + 64 * v + 4 * c, 4);
                    for (int t = 0; t < 8; t++) memcpy(blk.hmask + 4 * t, r + 1024 + 64 * t + 4 * c, 4);
                    uint8_t u[16]; /* the stored 6-bit values (scale + 32) */
                    for (int j = 0; j < 16; j++) u[j] = (uint8_t)((int8_t)r[1536 + 16 * j + c] + 32);
                    for (int j = 0; j < 8; j++) blk.scales[j] = (uint8_t)((u[j] & 0x0F) | ((u[j + 8] & 0x0F) << 4));
                    for (int q = 0; q < 4; q++)
                        blk.scales[8 + q] = (uint8_t)(((u[q] >> 4) & 3) | (((u[q + 4] >> 4) & 3) << 2) |
                                                      (((u[q + 8] >> 4) & 3) << 4) | (((u[q + 12] >> 4) & 3) << 6));
                    memcpy(&blk.d, r + 1792 + 2 * c, 2);
                    int32_t lane[8];
                    km_q3_k_lanes_ref(&blk, xb, lane);
                    const float t = xb->d * km_fp16_to_fp32(blk.d);
                    for (int l = 0; l < 8; ++l) acc[l] = fmaf(t, (float)lane[l], acc[l]);
                }
                y[m * N + n] = km_kq_reduce8(acc);
            }
        }
    }
}
