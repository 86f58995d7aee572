/* moe/combine_f32_avx2.c — km_moe_combine_f32__avx2: the avx2 variant of contract moe_combine.f32.v1 (8 lanes,
 * moe/combine_f32_simd.h); byte-identical to km_moe_combine_f32__ref for every (ith, nth). */
#include "combine_f32_simd.h"

void km_moe_combine_f32__avx2(float *y, const float *x, const float *wts, int64_t M, int64_t U, int64_t N, int ith,
                              int nth) {
    kmc_rows(y, x, wts, M, U, N, ith, nth);
}
