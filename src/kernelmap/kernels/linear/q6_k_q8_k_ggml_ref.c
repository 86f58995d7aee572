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
 *   The lanes are computed by linear/q6_k_vecdot_ref.h (shared with the q6_k_c16 layout's ref).
 */
#include <math.h>

#include "km_common.h"
#include "km_kquant.h"
#include "q6_k_vecdot_ref.h"

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
                int32_t lane[8];
                km_q6_k_lanes_ref(wb, xb, lane);
                const float t = km_fp16_to_fp32(wb->d) * xb->d;
                for (int l = 0; l < 8; ++l) acc[l] = fmaf(t, (float)lane[l], acc[l]);
            }
            y[m * N + n] = km_kq_reduce8(acc);
        }
    }
}
