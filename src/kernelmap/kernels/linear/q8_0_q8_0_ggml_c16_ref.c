/* linear/q8_0_q8_0_ggml_c16_ref.c — km_linear_q8_0_q8_0_ggml_c16__ref: the scalar oracle of contract
 * linear.q8_0.q8_0.ggml.v1 on weights in the repacked layout "q8_0_c16".
 *
 * Same op and numerics as linear/q8_0_q8_0_ggml_ref.c (llama.cpp's x86 vec_dot_q8_0_q8_0 order, stated once in
 * common/km_q8_0_ref.h and used from there: per output, acc[0..7] = +0; per block in order lane[l] = the exact
 * int32 sum of the 4 products at 4l..4l+3, t = f32(fp16(w.d) * fp16(x.d)), acc[l] = fmaf(t, (float)lane[l],
 * acc[l]); then the fold l + (l + 4), 0 + 2 / 1 + 3, 0 + 1). Only where a weight's bytes are differs: w is
 * "q8_0_c16" (weights/repack.py states it): rows in groups of 16 (ceil(N / 16) groups, pad rows zero bytes), each
 * group S + 512 nb bytes (nb = K / 32, S = 32 nb rounded up to 64): row c's f16 d of block b at 32 b + 2 c, value
 * 4 l + i of row c's block b at S + 512 b + 64 l + 4 c + i as an unsigned byte with the int8's sign bit flipped.
 * This file rebuilds each block's 32 int8 values and scale from there and runs the shared block step.
 * K must be a multiple of 32. Partition: groups of 16 output columns (km_part over the groups); no output depends
 * on (ith, nth) or M. Tests: this ref equals the GGUF-layout ref on the same values for every shape, and every
 * SIMD variant equals this ref (tests/kernels/test_linear_q8_0_c16.py).
 */
#include "km_common.h"
#include "km_q8_0_ref.h"

enum { C16 = 16, XBLK = 34 }; /* rows per group; the q8_0 activation block */

void km_linear_q8_0_q8_0_ggml_c16__ref(float *y, const void *w, const void *x, int64_t M, int64_t N, int64_t K,
                                       int ith, int nth) {
    const int64_t nb = K / 32, ng = (N + C16 - 1) / C16;
    const int64_t s = (32 * nb + 63) / 64 * 64, gbytes = s + 512 * nb;
    int64_t lo, hi;
    km_part(ng, ith, nth, &lo, &hi);
    const uint8_t *wb = (const uint8_t *)w;
    const km_block_q8_0 *xb = (const km_block_q8_0 *)x;
    for (int64_t g = lo; g < hi; g++) {
        const uint8_t *grp = wb + g * gbytes;
        for (int c = 0; c < C16 && g * C16 + c < N; c++) {
            const int64_t n = g * C16 + c;
            for (int64_t m = 0; m < M; m++) {
                float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
                for (int64_t b = 0; b < nb; b++) {
                    km_half d;
                    memcpy(&d, grp + 32 * b + 2 * c, 2);
                    int8_t q[32];
                    for (int l = 0; l < 8; l++)
                        for (int i = 0; i < 4; i++) q[4 * l + i] = (int8_t)(grp[s + 512 * b + 64 * l + 4 * c + i] ^ 0x80);
                    const km_block_q8_0 *xk = xb + m * nb + b;
                    km_q8_0_lanes_ggml_ref(acc, km_fp16_to_fp32(d) * km_fp16_to_fp32(xk->d), q, xk->qs);
                }
                y[m * N + n] = km_q8_0_fold_ggml_ref(acc);
            }
        }
    }
}
