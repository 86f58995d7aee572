/* linear/q8_0_q8_0_ggml_avx512vnni.c — km_linear_q8_0_q8_0_ggml__avx512vnni: linear.q8_0.q8_0.ggml.v1.
 *
 * Op, layouts and numerics exactly as linear/q8_0_q8_0_ggml_ref.c (llama.cpp's x86 order: 8 int32
 * lanes of 4 consecutive products per block, acc[l] = fma(f32(dw * dx), lane, acc[l]) in block
 * order, fold l+4, 0+2 / 1+3, 0+1); byte-identical to km_linear_q8_0_q8_0_ggml__ref for every
 * (ith, nth) and M. AVX-512 + VNNI + BMI2: vpdpbusd lanes with the magic int->float seed; prefill:
 * two outputs per zmm with interleaved lanes, tiles of 1 row pair x 16/8/4/2/1 activation rows;
 * decode one weight row at a time (ymm).
 * Body and exactness argument in linear/q32_ggml.h. Partition: output columns n (km_part over N).
 */
#include "km_common.h"
#include "km_simd.h"
#include "q32_ggml.h"

void km_linear_q8_0_q8_0_ggml__avx512vnni(float *y, const void *w, const void *x, int64_t M, int64_t N, int64_t K,
                                          int ith, int nth) {
    km_q32g_linear(y, w, x, M, N, K, ith, nth, 8);
}
