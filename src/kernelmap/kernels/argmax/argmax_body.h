/* argmax/argmax_body.h — the family body of argmax.f32.v1, written once against the lanes interface
 * (common/km_lanes.h); every ISA variant is an instantiation of it.
 *
 * Op (exactly argmax/f32_ref.c): y[m] = the index of the largest value of row m of x f32 [M, N], as int32;
 * ties go to the lowest index (+0.0 and -0.0 are equal); NaNs are ignored; a row of only NaNs gives 0; a
 * row whose largest non-NaN value is -inf gives the first -inf. Comparisons only: a NaN-ignoring vector
 * max (kl_fv_max(x, m) keeps m where x is NaN) and scalar compares for the row's tail, then the first
 * index equal to it. N >= 1, N < 2^31.
 * Partition: rows (km_part over M). No schedule parameters.
 */
#ifndef KM_ARGMAX_BODY_H
#define KM_ARGMAX_BODY_H

#include <math.h>

#include "km_lanes.h"

KL_INLINE int32_t kam_row(const float *x, int64_t N) {
    kl_fv vm = kl_fv_set1(-INFINITY);
    int64_t i = 0;
    for (; i + KL_FV_LANES <= N; i += KL_FV_LANES) vm = kl_fv_max(kl_fv_loadu(x + i), vm);
    float best = kl_fv_hmax(vm);
    for (; i < N; i++)
        if (x[i] > best) best = x[i];
    const kl_fv vb = kl_fv_set1(best);
    i = 0;
    for (; i + KL_FV_LANES <= N; i += KL_FV_LANES) {
        const unsigned eq = kl_fvm_bits(kl_fv_cmp_eq(kl_fv_loadu(x + i), vb));
        if (eq) return (int32_t)(i + __builtin_ctz(eq));
    }
    for (; i < N; i++)
        if (x[i] == best) return (int32_t)i;
    return 0;
}

static inline void kam_argmax(int32_t *y, const float *x, int64_t M, int64_t N, int ith, int nth) {
    int64_t lo, hi;
    km_part(M, ith, nth, &lo, &hi);
    for (int64_t m = lo; m < hi; m++) y[m] = kam_row(x + m * N, N);
}

#endif /* KM_ARGMAX_BODY_H */
