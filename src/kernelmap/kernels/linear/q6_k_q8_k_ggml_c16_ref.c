/* linear/q6_k_q8_k_ggml_c16_ref.c — km_linear_q6_k_q8_k_ggml_c16__ref: the scalar oracle of contract
 * linear.q6_k.q8_k.ggml.v1 (llama.cpp's x86 vec_dot_q6_K_q8_K order) on weights in the repacked layout "q6_k_c16".
 *
 * Same op and numerics as linear/q6_k_q8_k_ggml_ref.c (the superblock's eight int32 lanes stated once in
 * linear/q6_k_vecdot_ref.h, km_q6_k_lanes_ref; per output acc[l] = fmaf(fp16(d) * x.d, (float)lane[l], acc[l]) over
 * the superblocks in order, y = km_kq_reduce8(acc)). Only where a weight's bytes are differs: w is "q6_k_c16"
 * (weights/repack.py states it): rows in groups of 16 (ceil(N / 16) groups, pad rows zero bytes), each group K / 256
 * records of 3360 bytes; in record b, row c's ql dword v (v < 32) at 64 v + 4 c, its qh dword t (t < 16) at
 * 2048 + 64 t + 4 c, its scales 2 s and 2 s + 1 at 3072 + 32 s + 2 c, its f16 d at 3328 + 2 c. This file rebuilds
 * each superblock's GGUF block from there.
 * K must be a multiple of 256 (the map's constraint); every N.
 * Partition: groups of 16 output columns (km_part over the groups); no output depends on (ith, nth) or M.
 * Tests: this ref equals the GGUF-layout ref on the same values, and every SIMD variant equals this ref
 * (tests/kernels/test_linear_qk_c16.py).
 */
#include <math.h>
#include <string.h>

#include "km_common.h"
#include "km_kquant.h"
#include "q6_k_vecdot_ref.h"

enum { C16 = 16, REC = 3360 }; /* rows per group; bytes per superblock record */

void km_linear_q6_k_q8_k_ggml_c16__ref(float *y, const void *w, const void *x, int64_t M, int64_t N, int64_t K,
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
                    km_block_q6_k blk;
                    for (int v = 0; v < 32; v++) memcpy(blk.ql + 4 * v, r + 64 * v + 4 * c, 4);
                    for (int t = 0; t < 16; t++) memcpy(blk.qh + 4 * t, r + 2048 + 64 * t + 4 * c, 4);
                    for (int s = 0; s < 8; s++) memcpy(blk.scales + 2 * s, r + 3072 + 32 * s + 2 * c, 2);
                    memcpy(&blk.d, r + 3328 + 2 * c, 2);
                    int32_t lane[8];
                    km_q6_k_lanes_ref(&blk, xb, lane);
                    const float t = km_fp16_to_fp32(blk.d) * xb->d;
                    for (int l = 0; l < 8; ++l) acc[l] = fmaf(t, (float)lane[l], acc[l]);
                }
                y[m * N + n] = km_kq_reduce8(acc);
            }
        }
    }
}
