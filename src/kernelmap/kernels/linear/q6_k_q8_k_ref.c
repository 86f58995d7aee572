/* linear/q6_k_q8_k_ref.c — km_linear_q6_k_q8_k__ref: the scalar oracle of contract linear.q6_k.q8_k.f32.v1.
 *
 * Op: y[m][n] = sum_k dequant(w[n])[k] * dequant(x[m])[k]
 *   w: q6_k blocks [N][K/256] (ggml_blocks, 210 B per block, no alignment assumed)
 *   x: q8_k blocks [M][K/256] (row_major, 292 B per block; bsums must be the 16-value sums of qs,
 *      as quantize_act_q8_k writes them: the -32 offset term below uses them)
 *   y: f32 [M][N] row_major. K must be a multiple of 256 (no tails). Partition: output columns n
 *      (km_part over N); every thread computes all M rows of its columns.
 * Numerics (one point for ref, avx2 and avx512; SIMD variants must be byte-identical):
 *   with u[k] in 0..63 the unsigned 6-bit weight code (weight value u - 32) and sc[j] the int8
 *   scale of values 16j..16j+15,
 *     isum = sum_{j<16} sc[j] * (sum_{l<16} u[16j+l] * q8[16j+l] - 32 * bsums[j])   (exact int32)
 *     fd = fp16(w.d) * x.d                                                        (f32, rounded)
 *     p[b % 8] += fd * (float)isum                                                (f32, rounded)
 *   then y = km_kq_reduce8(p) with p initialised to +0.0f. No FMA anywhere.
 */
#include "km_common.h"
#include "km_kquant.h"
#include "q6_k_vecdot_ref.h" /* km_q6_codes_ref: the block's 6-bit codes */

void km_linear_q6_k_q8_k__ref(float *y, const void *w, const void *x, int64_t M, int64_t N, int64_t K,
                              int ith, int nth) {
    const int64_t nb = K / KM_QK_K;
    int64_t n0, n1;
    km_part(N, ith, nth, &n0, &n1);
    for (int64_t n = n0; n < n1; ++n) {
        const km_block_q6_k *wr = (const km_block_q6_k *)w + n * nb;
        for (int64_t m = 0; m < M; ++m) {
            const km_block_q8_k *xr = (const km_block_q8_k *)x + m * nb;
            float p[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
            for (int64_t b = 0; b < nb; ++b) {
                const km_block_q6_k *wb = &wr[b];
                const km_block_q8_k *xb = &xr[b];
                int32_t u[KM_QK_K];
                km_q6_codes_ref(wb, u);
                int32_t isum = 0;
                for (int j = 0; j < 16; ++j) {
                    int32_t dot = 0;
                    for (int l = 0; l < 16; ++l) {
                        dot += u[16 * j + l] * xb->qs[16 * j + l];
                    }
                    isum += (int32_t)wb->scales[j] * (dot - 32 * (int32_t)xb->bsums[j]);
                }
                const float fd = km_fp16_to_fp32(wb->d) * xb->d;
                p[b & 7] += fd * (float)isum;
            }
            y[m * N + n] = km_kq_reduce8(p);
        }
    }
}
