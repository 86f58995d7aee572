/* linear/q2_k_q8_k_ggml_ref.c — km_linear_q2_k_q8_k_ggml__ref: the scalar oracle of contract
 * linear.q2_k.q8_k.ggml.v1 (llama.cpp's x86 order for q2_K weights on an AVX-512 build: it repacks
 * q2_K tensors 8 rows at a time and multiplies with its q2_K 8x8 gemv / gemm).
 *
 * Op: y[m][n] = sum_k dequant(w[n])[k] * dequant(x[m])[k]
 *   w: q2_k blocks [N][K/256] (ggml_blocks, 84 B per block: scales[16] (low nibble scale, high
 *      nibble min of each 16 values), qs[64] (2-bit codes), f16 d, f16 dmin; no alignment assumed)
 *   x: q8_k blocks [M][K/256] (row_major, 292 B per block; bsums must be the 16-value sums of qs,
 *      as quantize_act_q8_k writes them)
 *   y: f32 [M][N] row_major. K must be a multiple of 256 (no tails). Partition: output columns n
 *      (km_part over N); every thread computes all M rows of its columns.
 * Numerics (SIMD variants must be byte-identical): for each (m, n), acc = accm = +0.0f, then for the
 * superblocks b = 0, 1, ... in order, with q[e] the 2-bit code of value e (value 128h + 32k + i is bits
 * 2k..2k+1 of qs[32h + i]) and sc[j] / mn[j] the scale / min of values 16j..16j+15,
 *     isum = sum_{j<16} sc[j] * sum_{i<16} q[16j+i] * q8[16j+i]      (exact int32)
 *     imin = sum_{j<16} mn[j] * bsums[j]                              (exact int32)
 *     fd = fp16(w.d) * x.d;  fm = fp16(w.dmin) * x.d                   (f32, rounded)
 *     acc = fmaf((float)isum, fd, acc);  accm = fmaf((float)imin, fm, accm)
 *   y = acc - accm (f32). No other float operation; fmaf() is the only fused one. (The same shape as
 *   linear.q4_k.q8_k.ggml.v1 with q2_K's codes, 16 scales and 16 mins.)
 * When N % 8 != 0 llama.cpp does not repack the tensor and its vec_dot_q2_K_q8_K order applies instead
 * (km_q2_k_vec_dot_ref in q2_k_vecdot_ref.h, shared with linear.q2_k.q8_k.ggml_vecdot.v1):
 *   8 f32 lanes acc[l] = +0; per superblock, P[l] = mn[2l] * bsums[2l] + mn[2l+1] * bsums[2l+1] and
 *   lane[l] = sum_{c<8} sum_{i<4} sc[e/16] * q[e] * q8[e] (e = 32c + 4l + i) (exact int32),
 *   dmin = -(x.d * fp16(w.dmin)), d = x.d * fp16(w.d), acc[l] = fmaf(dmin, (float)P[l], acc[l]) then
 *   acc[l] = fmaf(d, (float)lane[l], acc[l]); y = km_kq_reduce8(acc).
 */
#include <math.h>

#include "km_common.h"
#include "km_kquant.h"
#include "q2_k_vecdot_ref.h"

void km_linear_q2_k_q8_k_ggml__ref(float *y, const void *w, const void *x, int64_t M, int64_t N, int64_t K,
                                   int ith, int nth) {
    const int64_t nb = K / KM_QK_K;
    int64_t n0, n1;
    km_part(N, ith, nth, &n0, &n1);
    if (N % 8 != 0) {
        for (int64_t n = n0; n < n1; ++n)
            for (int64_t m = 0; m < M; ++m)
                y[m * N + n] = km_q2_k_vec_dot_ref((const km_block_q2_k *)w + n * nb, (const km_block_q8_k *)x + m * nb, nb);
        return;
    }
    for (int64_t n = n0; n < n1; ++n) {
        const km_block_q2_k *wr = (const km_block_q2_k *)w + n * nb;
        for (int64_t m = 0; m < M; ++m) {
            const km_block_q8_k *xr = (const km_block_q8_k *)x + m * nb;
            float acc = 0.0f, accm = 0.0f;
            for (int64_t b = 0; b < nb; ++b) {
                const km_block_q2_k *wb = &wr[b];
                const km_block_q8_k *xb = &xr[b];
                int32_t isum, imin;
                km_q2_k_repack_sums_ref(wb, xb, &isum, &imin);
                const float fd = km_fp16_to_fp32(wb->d) * xb->d;
                const float fm = km_fp16_to_fp32(wb->dmin) * xb->d;
                acc = fmaf((float)isum, fd, acc);
                accm = fmaf((float)imin, fm, accm);
            }
            y[m * N + n] = acc - accm;
        }
    }
}
