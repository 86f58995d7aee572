/* linear/q2_k_q8_k_ggml_vecdot_ref.c — km_linear_q2_k_q8_k_ggml_vecdot__ref: the scalar oracle of contract
 * linear.q2_k.q8_k.ggml_vecdot.v1 (llama.cpp's order for q2_K weights on its AVX2 build, GGML_AVX512=OFF: that
 * build does not repack q2_K tensors, so every row of every tensor goes through vec_dot_q2_K_q8_K; its AVX-512
 * build repacks tensors of N % 8 == 0 rows instead: linear.q2_k.q8_k.ggml.v1).
 *
 * Op: y[m][n] = sum_k dequant(w[n])[k] * dequant(x[m])[k]
 *   w: q2_k blocks [N][K/256] (ggml_blocks, 84 B per block: scales[16] (low nibble scale, high nibble min of
 *      each 16 values), qs[64] (2-bit codes), f16 d, f16 dmin; no alignment assumed)
 *   x: q8_k blocks [M][K/256] (row_major, 292 B per block; bsums must be the 16-value sums of qs, as
 *      quantize_act_q8_k writes them)
 *   y: f32 [M][N] row_major. K must be a multiple of 256 (no tails). Partition: output columns n (km_part over
 *      N); every thread computes all M rows of its columns.
 * Numerics (SIMD variants must be byte-identical): every output (m, n) is km_q2_k_vec_dot_ref of its weight row
 * and activation row (q2_k_vecdot_ref.h states the order: 8 f32 lanes, the min products fused in before the
 * scale products per superblock, km_kq_reduce8 at the end), whatever N is.
 */
#include "km_common.h"
#include "km_kquant.h"
#include "q2_k_vecdot_ref.h"

void km_linear_q2_k_q8_k_ggml_vecdot__ref(float *y, const void *w, const void *x, int64_t M, int64_t N, int64_t K,
                                          int ith, int nth) {
    const int64_t nb = K / KM_QK_K;
    int64_t n0, n1;
    km_part(N, ith, nth, &n0, &n1);
    for (int64_t n = n0; n < n1; ++n)
        for (int64_t m = 0; m < M; ++m)
            y[m * N + n] = km_q2_k_vec_dot_ref((const km_block_q2_k *)w + n * nb, (const km_block_q8_k *)x + m * nb, nb);
}
