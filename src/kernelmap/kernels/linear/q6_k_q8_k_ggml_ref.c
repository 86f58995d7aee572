/* linear/q6_k_q8_k_ggml_ref.c — km_linear_q6_k_q8_k_ggml__ref: the scalar oracle of contract
 * linear.q6_k.q8_k.ggml.v1 (llama.cpp's x86 vec_dot_q6_K_q8_K summation order, not repacked).
 *
 * Op: y[m][n] = sum_k dequant(w[n])[k] * dequant(x[m])[k]
 *   w: q6_k blocks [N][K/256] (ggml_blocks, 210 B per block, no alignment assumed)
 *   x: q8_k blocks [M][K/256] (row_major, 292 B per block; bsums must be the 16-value sums of qs,
 *      as quantize_act_q8_k writes them: the -32 offset term below uses them)
 *   y: f32 [M][N] row_major. K must be a multiple of 256 (no tails). Partition: output columns n
 *      (km_part over N); every thread computes all M rows of its columns, so y[m][n] never depends on
 *      M, on (ith, nth) or on any tiling.
 * Numerics (one point for ref, avx2 and avx512; SIMD variants must be byte-identical):
 *   u[e] in 0..63 is the unsigned 6-bit code of value e of a superblock (weight value u - 32),
 *   sc[j] the int8 scale of values 16j..16j+15, bs[j] the activation's bsums. Per superblock b,
 *   8 exact int32 lanes l = 0..7:
 *     lane[l] = sum_{c<8} sum_{i<4} sc[e/16] * u[e] * q8[e]   (e = 32c + 4l + i)
 *               - 32 * (sc[2l] * bs[2l] + sc[2l+1] * bs[2l+1])
 *   (the offset of lane l covers sub-blocks 2l and 2l+1, not the values of lane l: that is how
 *   llama.cpp's madd of the 16 scales with the 16 bsums lands in its 8 lanes), then
 *     t = fp16(w.d) * x.d                                (f32, rounded)
 *     acc[l] = fmaf(t, (float)lane[l], acc[l])           (one fused multiply-add, acc starts at +0)
 *   and finally y = ((acc0+acc4) + (acc2+acc6)) + ((acc1+acc5) + (acc3+acc7)) (km_kq_reduce8).
 */
#include <math.h>

#include "km_common.h"
#include "km_kquant.h"

/* The 256 unsigned 6-bit codes of a q6_k block, in value order. Each 128-value half h has 64 ql
 * bytes and 32 qh bytes; value 128h + 32q + l (q = 0..3, l = 0..31) takes its low 4 bits from
 * ql[l + 32*(q & 1)] (low nibble for q < 2, high nibble otherwise) and its top 2 bits from
 * bits 2q..2q+1 of qh[l]. */
static void q6_codes(const km_block_q6_k *b, int32_t u[KM_QK_K]) {
    for (int h = 0; h < 2; ++h) {
        const uint8_t *ql = b->ql + 64 * h;
        const uint8_t *qh = b->qh + 32 * h;
        int32_t *o = u + 128 * h;
        for (int l = 0; l < 32; ++l) {
            o[l] = (ql[l] & 0x0F) | ((qh[l] & 3) << 4);
            o[l + 32] = (ql[l + 32] & 0x0F) | (((qh[l] >> 2) & 3) << 4);
            o[l + 64] = (ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4);
            o[l + 96] = (ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4);
        }
    }
}

void km_linear_q6_k_q8_k_ggml__ref(float *y, const void *w, const void *x, int64_t M, int64_t N, int64_t K,
                                   int ith, int nth) {
    const int64_t nb = K / KM_QK_K;
    int64_t n0, n1;
    km_part(N, ith, nth, &n0, &n1);
    for (int64_t n = n0; n < n1; ++n) {
        const km_block_q6_k *wr = (const km_block_q6_k *)w + n * nb;
        for (int64_t m = 0; m < M; ++m) {
            const km_block_q8_k *xr = (const km_block_q8_k *)x + m * nb;
            float acc[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
            for (int64_t b = 0; b < nb; ++b) {
                const km_block_q6_k *wb = &wr[b];
                const km_block_q8_k *xb = &xr[b];
                int32_t u[KM_QK_K];
                q6_codes(wb, u);
                const float t = km_fp16_to_fp32(wb->d) * xb->d;
                for (int l = 0; l < 8; ++l) {
                    int32_t lane = 0;
                    for (int c = 0; c < 8; ++c) {
                        for (int i = 0; i < 4; ++i) {
                            const int e = 32 * c + 4 * l + i;
                            lane += (int32_t)wb->scales[e / 16] * u[e] * (int32_t)xb->qs[e];
                        }
                    }
                    lane -= 32 * ((int32_t)wb->scales[2 * l] * (int32_t)xb->bsums[2 * l] +
                                  (int32_t)wb->scales[2 * l + 1] * (int32_t)xb->bsums[2 * l + 1]);
                    acc[l] = fmaf(t, (float)lane, acc[l]);
                }
            }
            y[m * N + n] = km_kq_reduce8(acc);
        }
    }
}
