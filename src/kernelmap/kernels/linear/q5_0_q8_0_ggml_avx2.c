/* linear/q5_0_q8_0_ggml_avx2.c — km_linear_q5_0_q8_0_ggml__avx2: linear.q5_0.q8_0.ggml.v1.
 *
 * Op, layouts and numerics exactly as linear/q5_0_q8_0_ggml_ref.c (llama.cpp's x86 order: 8 int32
 * lanes of 4 consecutive products per block, acc[l] = fma(f32(dw * dx), lane, acc[l]) in block
 * order, fold l+4, 0+2 / 1+3, 0+1); byte-identical to km_linear_q5_0_q8_0_ggml__ref for every
 * (ith, nth) and M. AVX2 + FMA + F16C: one ymm accumulator per output; prefill tiles of 2 weight rows x 4/2/1
 * activation rows, decode one weight row at a time.
 * Body and exactness argument in linear/q32_ggml.h. Partition: output columns n (km_part over N).
 */
#include "km_common.h"
#include "km_simd.h"
#include "q32_ggml.h"

void km_linear_q5_0_q8_0_ggml__avx2(float *y, const void *w, const void *x, int64_t M, int64_t N, int64_t K,
                                    int ith, int nth) {
    km_q32g_linear(y, w, x, M, N, K, ith, nth, 5);
}
