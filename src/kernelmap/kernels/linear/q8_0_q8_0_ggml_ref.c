/* linear/q8_0_q8_0_ggml_ref.c — km_linear_q8_0_q8_0_ggml__ref: the scalar oracle of linear.q8_0.q8_0.ggml.v1.
 *
 * Op: y[m][n] = sum_k dequant(w[n])[k] * dequant(x[m])[k]; w [N,K] q8_0 in ggml_blocks (one row of
 * K/32 blocks per output column), x [M,K] q8_0 rows (quants in [-127, 127], as quantize_act_q8_0
 * writes them), y [M,N] f32 row-major. K must be a multiple of 32 (no tails inside a row).
 * Numerics (llama.cpp's x86 vec_dot_q8_0_q8_0 order; every variant is bit-exact with this file):
 * acc[0..7] = +0; for each block b in increasing order: lane[l] = exact int32 sum of the 4 products
 * w[4l+i] * x[4l+i], i = 0..3 (w = the stored int8); t = f32(fp16(w.d) * fp16(x.d));
 * acc[l] = fmaf(t, (float)lane[l], acc[l]). Then h[l] = acc[l] + acc[l+4] (l < 4), g0 = h0 + h2,
 * g1 = h1 + h3, y = g0 + g1, each an f32 add (common/km_q8_0_ref.h). FMA is part of the contract.
 * Partition: output columns n (km_part over N); results are identical for every (ith, nth) and M.
 */
#include "km_common.h"
#include "km_q8_0_ref.h"

void km_linear_q8_0_q8_0_ggml__ref(float *y, const void *w, const void *x, int64_t M, int64_t N, int64_t K,
                                   int ith, int nth) {
    int64_t lo, hi;
    km_part(N, ith, nth, &lo, &hi);
    const int64_t nb = K / 32;
    const km_block_q8_0 *wb = (const km_block_q8_0 *)w;
    const km_block_q8_0 *xb = (const km_block_q8_0 *)x;
    for (int64_t n = lo; n < hi; n++) {
        for (int64_t m = 0; m < M; m++) y[m * N + n] = km_q8_0_dot_ggml_ref(wb + n * nb, xb + m * nb, nb);
    }
}
