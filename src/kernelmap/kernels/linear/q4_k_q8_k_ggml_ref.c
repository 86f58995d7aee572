/* linear/q4_k_q8_k_ggml_ref.c — km_linear_q4_k_q8_k_ggml__ref: the scalar oracle of contract
 * linear.q4_k.q8_k.ggml.v1 (llama.cpp's x86 order for q4_K weights: its repacked q4_K 8x8 gemv).
 *
 * Op: y[m][n] = sum_k dequant(w[n])[k] * dequant(x[m])[k]
 *   w: q4_k blocks [N][K/256] (ggml_blocks, 144 B per block, rows 4-byte aligned at least)
 *   x: q8_k blocks [M][K/256] (row_major, 292 B per block: d f32, qs int8[256], bsums int16[16];
 *      bsums must be the 16-value sums of qs, as quantize_act_q8_k writes them)
 *   y: f32 [M][N] row_major. K must be a multiple of 256 (no tails). Partition: output columns n
 *      (km_part over N); every thread computes all M rows of its columns.
 * Numerics (SIMD variants must be byte-identical): for each (m, n), acc = accm = +0.0f, then for the
 * superblocks b = 0, 1, ... in order, with sc[j]/mn[j] the 6-bit scales/mins of w's block b,
 *     isum = sum_{j<8} sc[j] * sum_{l<32} q4[32j+l] * q8[32j+l]        (exact int32)
 *     imin = sum_{j<8} mn[j] * (bsums[2j] + bsums[2j+1])                 (exact int32)
 *     fd = fp16(w.d) * x.d;  fm = fp16(w.dmin) * x.d                     (f32, rounded)
 *     acc  = fma((float)isum, fd, acc);  accm = fma((float)imin, fm, accm) (one rounding each)
 *   y = acc - accm (f32). No other float operation; fmaf() is the only fused one.
 * When N % 8 != 0 llama.cpp does not repack the tensor and its vec_dot_q4_K_q8_K order applies instead:
 *   8 f32 lanes acc[l] and 4 lanes accm[k] from +0; per superblock, lane[l] = sum_{c<8} sc[c] * sum_{i<4}
 *   q4[e] * q8[e] (e = 32c + 4l + i), P4[k] = mn[2k] * ps[2k] + mn[2k+1] * ps[2k+1] with ps[j] =
 *   bsums[2j] + bsums[2j+1] (exact int32), dmin = -(x.d * fp16(w.dmin)), d = x.d * fp16(w.d),
 *   accm[k] = fmaf(dmin, (float)P4[k], accm[k]), acc[l] = fmaf(d, (float)lane[l], acc[l]);
 *   y = km_kq_reduce8(acc) + ((accm0 + accm2) + (accm1 + accm3)).
 */
#include <math.h>

#include "km_common.h"
#include "km_kquant.h"

/* y for one (weight row, activation row) in llama.cpp's vec_dot_q4_K_q8_K order (N % 8 != 0). */
static float q4_vec_dot(const km_block_q4_k *wr, const km_block_q8_k *xr, int64_t nb) {
    float acc[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
    float accm[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int64_t b = 0; b < nb; ++b) {
        const km_block_q4_k *wb = &wr[b];
        const km_block_q8_k *xb = &xr[b];
        uint8_t sc[8], mn[8];
        km_q4k_scales(wb->scales, sc, mn);
        const float d = xb->d * km_fp16_to_fp32(wb->d);
        const float dmin = -(xb->d * km_fp16_to_fp32(wb->dmin));
        for (int k = 0; k < 4; ++k) {
            int32_t p = 0;
            for (int j = 2 * k; j < 2 * k + 2; ++j) p += (int32_t)mn[j] * ((int32_t)xb->bsums[2 * j] + xb->bsums[2 * j + 1]);
            accm[k] = fmaf(dmin, (float)p, accm[k]);
        }
        for (int l = 0; l < 8; ++l) {
            int32_t lane = 0;
            for (int c = 0; c < 8; ++c) {
                for (int i = 0; i < 4; ++i) {
                    const int e = 32 * c + 4 * l + i;
                    const uint8_t q = wb->qs[32 * (c / 2) + e % 32];
                    lane += (int32_t)sc[c] * (int32_t)(c % 2 ? q >> 4 : q & 0x0F) * (int32_t)xb->qs[e];
                }
            }
            acc[l] = fmaf(d, (float)lane, acc[l]);
        }
    }
    return km_kq_reduce8(acc) + ((accm[0] + accm[2]) + (accm[1] + accm[3]));
}

void km_linear_q4_k_q8_k_ggml__ref(float *y, const void *w, const void *x, int64_t M, int64_t N, int64_t K,
                                   int ith, int nth) {
    const int64_t nb = K / KM_QK_K;
    int64_t n0, n1;
    km_part(N, ith, nth, &n0, &n1);
    if (N % 8 != 0) {
        for (int64_t n = n0; n < n1; ++n)
            for (int64_t m = 0; m < M; ++m)
                y[m * N + n] = q4_vec_dot((const km_block_q4_k *)w + n * nb, (const km_block_q8_k *)x + m * nb, nb);
        return;
    }
    for (int64_t n = n0; n < n1; ++n) {
        const km_block_q4_k *wr = (const km_block_q4_k *)w + n * nb;
        for (int64_t m = 0; m < M; ++m) {
            const km_block_q8_k *xr = (const km_block_q8_k *)x + m * nb;
            float acc = 0.0f, accm = 0.0f;
            for (int64_t b = 0; b < nb; ++b) {
                const km_block_q4_k *wb = &wr[b];
                const km_block_q8_k *xb = &xr[b];
                uint8_t sc[8], mn[8];
                km_q4k_scales(wb->scales, sc, mn);
                int32_t isum, imin;
                km_q4k_repack_sums_ref(wb->qs, sc, mn, xb, &isum, &imin);
                const float fd = km_fp16_to_fp32(wb->d) * xb->d;
                const float fm = km_fp16_to_fp32(wb->dmin) * xb->d;
                acc = fmaf((float)isum, fd, acc);
                accm = fmaf((float)imin, fm, accm);
            }
            y[m * N + n] = acc - accm;
        }
    }
}
