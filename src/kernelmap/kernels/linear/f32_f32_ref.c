/* linear/f32_f32_ref.c — km_linear_f32_f32__ref: the scalar oracle of linear.f32.f32.f32.v1.
 *
 * Op: y[m][n] = sum_k w[n][k] * x[m][k]; w [N,K] f32 row-major, x [M,K] f32 row-major, y [M,N] f32.
 * Any K >= 1. Numerics (the contract; every variant is bit-exact with this file): 16 partials from
 * +0, p[k mod 16] = fmaf(w[n][k], x[m][k], p[k mod 16]) for increasing k; s8[l] = p[l] + p[l + 8];
 * y = ((s0 + s4) + (s2 + s6)) + ((s1 + s5) + (s3 + s7)). FMA is part of the contract.
 * Partition: output columns n (km_part over N); results are identical for every (ith, nth).
 */
#include <math.h>

#include "km_common.h"
#include "km_simd.h"

void km_linear_f32_f32__ref(float *y, const float *w, const float *x, int64_t M, int64_t N, int64_t K,
                            int ith, int nth) {
    int64_t lo, hi;
    km_part(N, ith, nth, &lo, &hi);
    for (int64_t n = lo; n < hi; n++) {
        for (int64_t m = 0; m < M; m++) {
            float p[16] = {0};
            const float *wr = w + n * K;
            const float *xr = x + m * K;
            for (int64_t k = 0; k < K; k++) p[k & 15] = fmaf(wr[k], xr[k], p[k & 15]);
            y[m * N + n] = km_tree16(p);
        }
    }
}
