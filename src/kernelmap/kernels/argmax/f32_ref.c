/* argmax/f32_ref.c — km_argmax_f32__ref: the scalar oracle of contract argmax.f32.v1.
 *
 * Op: y[m] = index of the largest value of row m of x f32 [M, N] (row-major), as int32.
 * Ties go to the lowest index (+0.0 and -0.0 are equal). NaNs are ignored; a row of only NaNs
 * gives 0; a row whose largest non-NaN value is -inf gives the first -inf. Comparisons only, so
 * every variant returns the same index (SIMD: a NaN-ignoring vector max, then the first index
 * equal to it). N >= 1, N < 2^31. Partition: rows (km_part over M).
 */
#include <math.h>

#include "km_common.h"

static int32_t argmax_row(const float *x, int64_t N) {
    int64_t idx = -1;
    float best = -INFINITY;
    for (int64_t i = 0; i < N; i++) {
        const float v = x[i];
        if (v > best || (idx < 0 && v == best)) {
            best = v;
            idx = i;
        }
    }
    return idx < 0 ? 0 : (int32_t)idx;
}

void km_argmax_f32__ref(int32_t *y, const float *x, int64_t M, int64_t N, int ith, int nth) {
    int64_t lo, hi;
    km_part(M, ith, nth, &lo, &hi);
    for (int64_t m = lo; m < hi; m++) y[m] = argmax_row(x + m * N, N);
}
