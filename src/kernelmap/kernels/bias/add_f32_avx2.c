/* bias/add_f32_avx2.c — km_bias_add_f32__avx2: the avx2 variant of contract bias_add.f32.v1 (8-lane f32
 * adds, bias/add_f32_simd.h); byte-identical to km_bias_add_f32__ref for every (ith, nth). */
#include "add_f32_simd.h"

void km_bias_add_f32__avx2(float *y, const float *x, const float *b, int64_t M, int64_t N, int ith, int nth) {
    kba_rows(y, x, b, M, N, ith, nth);
}
