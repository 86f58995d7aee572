/* linear/q3_k_q8_k_ggml_ref.c — km_linear_q3_k_q8_k_ggml__ref: the scalar oracle of contract
 * linear.q3_k.q8_k.ggml.v1 (llama.cpp's x86 vec_dot_q3_K_q8_K summation order; q3_K is not repacked).
 *
 * Op: y[m][n] = sum_k dequant(w[n])[k] * dequant(x[m])[k]
 *   w: q3_k blocks [N][K/256] (ggml_blocks, 110 B per block: hmask[32], qs[64], scales[12], f16 d;
 *      no alignment assumed)
 *   x: q8_k blocks [M][K/256] (row_major, 292 B per block)
 *   y: f32 [M][N] row_major. K must be a multiple of 256 (no tails). Partition: output columns n
 *      (km_part over N); every thread computes all M rows of its columns, so y[m][n] never depends on
 *      M, on (ith, nth) or on any tiling.
 * Numerics (SIMD variants must be byte-identical): q[e] in -4..3 is the signed code of value e (value
 * 128h + 32k + i: bits 2k..2k+1 of qs[32h + i], minus 4 when bit 4h + k of hmask[i] is clear), sc[j] the
 * signed 6-bit scale of values 16j..16j+15 (stored - 32). Per superblock b, 8 exact int32 lanes l:
 *     lane[l] = sum_{c<8} sum_{i<4} sc[e/16] * q[e] * q8[e]   (e = 32c + 4l + i)
 *     t = x.d * fp16(w.d)                                     (f32, rounded)
 *     acc[l] = fmaf(t, (float)lane[l], acc[l])                (acc starts at +0)
 *   and finally y = ((acc0+acc4) + (acc2+acc6)) + ((acc1+acc5) + (acc3+acc7)) (km_kq_reduce8).
 * The lanes are stated once in linear/q3_k_vecdot_ref.h (shared with the q3_k_c16 layout's ref).
 */
#include <math.h>

#include "km_common.h"
#include "km_kquant.h"
#include "q3_k_vecdot_ref.h"

void km_linear_q3_k_q8_k_ggml__ref(float *y, const void *w, const void *x, int64_t M, int64_t N, int64_t K,
                                   int ith, int nth) {
    const int64_t nb = K / KM_QK_K;
    int64_t n0, n1;
    km_part(N, ith, nth, &n0, &n1);
    for (int64_t n = n0; n < n1; ++n) {
        const km_block_q3_k *wr = (const km_block_q3_k *)w + n * nb;
        for (int64_t m = 0; m < M; ++m) {
            const km_block_q8_k *xr = (const km_block_q8_k *)x + m * nb;
            float acc[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
            for (int64_t b = 0; b < nb; ++b) {
                const km_block_q3_k *wb = &wr[b];
                const km_block_q8_k *xb = &xr[b];
                int32_t lane[8];
                km_q3_k_lanes_ref(wb, xb, lane);
                const float t = xb->d * km_fp16_to_fp32(wb->d);
                for (int l = 0; l < 8; ++l) acc[l] = fmaf(t, (float)lane[l], acc[l]);
            }
            y[m * N + n] = km_kq_reduce8(acc);
        }
    }
}
