/* linear/q8_0_f32_ref.c — km_linear_q8_0_f32__ref: the scalar oracle of linear.q8_0.f32.f32.v1.
 *
 * Op: y[m][n] = sum_k dequant(w[n])[k] * x[m][k]; w [N,K] q8_0 in ggml_blocks (K/32 blocks per
 * row), x [M,K] f32 row-major, y [M,N] f32. K % 32 == 0. Numerics (the contract; every variant is
 * bit-exact with this file): dequant(w)[k] = fp16(d_b) * (float)q_k, exact in f32; 16 partials from
 * +0, p[k mod 16] = fmaf(dequant(w)[k], x[m][k], p[k mod 16]) for increasing k; s8[l] = p[l] + p[l + 8];
 * y = ((s0 + s4) + (s2 + s6)) + ((s1 + s5) + (s3 + s7)). FMA is part of the contract.
 * Partition: output columns n (km_part over N); results are identical for every (ith, nth).
 */
#include <math.h>

#include "km_common.h"
#include "km_simd.h"

void km_linear_q8_0_f32__ref(float *y, const void *w, const float *x, int64_t M, int64_t N, int64_t K,
                             int ith, int nth) {
    int64_t lo, hi;
    km_part(N, ith, nth, &lo, &hi);
    const int64_t nb = K / KM_QK8_0;
    const km_block_q8_0 *wb = (const km_block_q8_0 *)w;
    for (int64_t n = lo; n < hi; n++) {
        for (int64_t m = 0; m < M; m++) {
            float p[16] = {0};
            const float *xr = x + m * K;
            for (int64_t b = 0; b < nb; b++) {
                const km_block_q8_0 *blk = &wb[n * nb + b];
                const float d = km_fp16_to_fp32(blk->d);
                for (int i = 0; i < KM_QK8_0; i++) {
                    p[i & 15] = fmaf(d * (float)blk->qs[i], xr[b * KM_QK8_0 + i], p[i & 15]);
                }
            }
            y[m * N + n] = km_tree16(p);
        }
    }
}
