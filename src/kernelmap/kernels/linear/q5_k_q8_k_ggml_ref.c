/* linear/q5_k_q8_k_ggml_ref.c — km_linear_q5_k_q8_k_ggml__ref: the scalar oracle of contract
 * linear.q5_k.q8_k.ggml.v1 (llama.cpp's x86 vec_dot_q5_K_q8_K summation order; q5_K is not repacked
 * on x86).
 *
 * Op: y[m][n] = sum_k dequant(w[n])[k] * dequant(x[m])[k]
 *   w: q5_k blocks [N][K/256] (ggml_blocks, 176 B per block: f16 d, f16 dmin, scales[12], qh[32],
 *      qs[128]; no alignment assumed)
 *   x: q8_k blocks [M][K/256] (row_major, 292 B per block; bsums must be the 16-value sums of qs,
 *      as quantize_act_q8_k writes them: the min term uses them)
 *   y: f32 [M][N] row_major. K must be a multiple of 256 (no tails). Partition: output columns n
 *      (km_part over N); every thread computes all M rows of its columns.
 * Numerics (SIMD variants must be byte-identical): u[e] in 0..31 is the 5-bit code of value e (value
 * 64g + 32s + i: nibble s (0 low, 1 high) of qs[32g + i], plus 16 when bit 2g + s of qh[i] is set),
 * sc[j] / mn[j] the 6-bit scale / min of values 32j..32j+31. Per superblock b:
 *     lane[l] = sum_{c<8} sum_{i<4} sc[c] * u[e] * q8[e]   (e = 32c + 4l + i; exact int32, l < 8)
 *     imin = sum_{j<8} mn[j] * (bsums[2j] + bsums[2j+1])  (exact int32)
 *     t = x.d * fp16(w.d);  tm = -(x.d * fp16(w.dmin))     (f32, rounded)
 *     acc[l] = fmaf(t, (float)lane[l], acc[l]);  summ = fmaf((float)imin, tm, summ)   (from +0)
 *   y = km_kq_reduce8(acc) + summ (f32). (The min chain is the scalar `summs += dmin * imin` of
 *   llama.cpp's AVX2 code, which its GCC build contracts to one fused multiply-add.)
 */
#include <math.h>

#include "km_common.h"
#include "km_kquant.h"

void km_linear_q5_k_q8_k_ggml__ref(float *y, const void *w, const void *x, int64_t M, int64_t N, int64_t K,
                                   int ith, int nth) {
    const int64_t nb = K / KM_QK_K;
    int64_t n0, n1;
    km_part(N, ith, nth, &n0, &n1);
    for (int64_t n = n0; n < n1; ++n) {
        const km_block_q5_k *wr = (const km_block_q5_k *)w + n * nb;
        for (int64_t m = 0; m < M; ++m) {
            const km_block_q8_k *xr = (const km_block_q8_k *)x + m * nb;
            float acc[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
            float summ = 0.0f;
            for (int64_t b = 0; b < nb; ++b) {
                const km_block_q5_k *wb = &wr[b];
                const km_block_q8_k *xb = &xr[b];
                uint8_t sc[8], mn[8];
                km_q4k_scales(wb->scales, sc, mn);
                int32_t u[KM_QK_K];
                for (int e = 0; e < KM_QK_K; ++e) {
                    const int g = e / 64, s = (e % 64) / 32, i = e % 32;
                    const int low = s ? wb->qs[32 * g + i] >> 4 : wb->qs[32 * g + i] & 0x0F;
                    u[e] = low + (((wb->qh[i] >> (2 * g + s)) & 1) ? 16 : 0);
                }
                const float t = xb->d * km_fp16_to_fp32(wb->d);
                for (int l = 0; l < 8; ++l) {
                    int32_t lane = 0;
                    for (int c = 0; c < 8; ++c) {
                        for (int i = 0; i < 4; ++i) {
                            const int e = 32 * c + 4 * l + i;
                            lane += (int32_t)sc[c] * u[e] * (int32_t)xb->qs[e];
                        }
                    }
                    acc[l] = fmaf(t, (float)lane, acc[l]);
                }
                int32_t imin = 0;
                for (int j = 0; j < 8; ++j) imin += (int32_t)mn[j] * ((int32_t)xb->bsums[2 * j] + xb->bsums[2 * j + 1]);
                const float tm = -(xb->d * km_fp16_to_fp32(wb->dmin));
                summ = fmaf((float)imin, tm, summ);
            }
            y[m * N + n] = km_kq_reduce8(acc) + summ;
        }
    }
}
