/* linear/q2_k_q8_k_ggml_c16_ref.c — km_linear_q2_k_q8_k_ggml_c16__ref: the scalar oracle of contract
 * linear.q2_k.q8_k.ggml.v1 (N % 8 == 0: llama.cpp's repacked q2_K order) on weights in the repacked layout
 * "q2_k_c16".
 *
 * Same op and numerics as linear/q2_k_q8_k_ggml_ref.c's N % 8 == 0 path (the superblock's integer sums stated once in
 * linear/q2_k_vecdot_ref.h, km_q2_k_repack_sums_ref; per output acc = fmaf((float)isum, fp16(d) * x.d, acc), accm =
 * fmaf((float)imin, fp16(dmin) * x.d, accm) over the superblocks in order, y = acc - accm). Only where a weight's
 * bytes are differs: w is "q2_k_c16" (weights/repack.py states it): rows in groups of 16 (ceil(N / 16) groups, pad
 * rows zero bytes), each group K / 256 records of 1344 bytes; in record b, row c's qs dword v (v < 16) at 64 v + 4 c,
 * its scale byte j at 1024 + 16 j + c, its f16 d at 1280 + 2 c and dmin at 1312 + 2 c. This file rebuilds each
 * superblock's GGUF block from there.
 * K must be a multiple of 256 and N of 8 (the map's constraints: llama.cpp takes its vec_dot order otherwise).
 * Partition: groups of 16 output columns (km_part over the groups); no output depends on (ith, nth) or M.
 * Tests: this ref equals the GGUF-layout ref on the same values, and every SIMD variant equals this ref
 * (tests/kernels/test_linear_qk_c16.py).
 */
#include <math.h>

#include "km_common.h"
#include "km_kquant.h"
#include "q2_k_vecdot_ref.h"

enum { C16 = 16, REC = 1344 }; /* rows per group; bytes per superblock record */

void km_linear_q2_k_q8_k_ggml_c16__ref(float *y, const void *w, const void *x, int64_t M, int64_t N, int64_t K,
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
                float acc = 0.0f, accm = 0.0f;
                for (int64_t b = 0; b < nb; b++) {
                    const uint8_t *r = wb + (g * nb + b) * REC;
                    const km_block_q8_k *xb = &xq[m * nb + b];
                    km_block_q2_k blk;
                    for (int v = 0; v < 16; v++) memcpy(blk.qs + 4 * v, r + 64 * v + 4 * c, 4);
                    for (int j = 0; j < 16; j++) blk.scales[j] = r[1024 + 16 * j + c];
                    memcpy(&blk.d, r + 1280 + 2 * c, 2);
                    memcpy(&blk.dmin, r + 1312 + 2 * c, 2);
                    int32_t isum, imin;
                    km_q2_k_repack_sums_ref(&blk, xb, &isum, &imin);
                    acc = fmaf((float)isum, km_fp16_to_fp32(blk.d) * xb->d, acc);
                    accm = fmaf((float)imin, km_fp16_to_fp32(blk.dmin) * xb->d, accm);
                }
                y[m * N + n] = acc - accm;
            }
        }
    }
}
