/* bias/add_f32_avx512.c — km_bias_add_f32__avx512: the avx512 variant of contract bias_add.f32.v1 (16-lane
 * f32 adds, bias/add_f32_simd.h); byte-identical to km_bias_add_f32__ref for every (ith, nth). */
#include "add_f32_simd.h"

void km_bias_add_f32__avx512(float *y, const float *x, const float *b, int64_t M, int64_t N, int ith, int nth) {
    kba_rows(y, x, b, M, N, ith, nth);
}
