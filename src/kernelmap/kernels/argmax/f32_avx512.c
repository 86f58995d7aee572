/* argmax/f32_avx512.c — km_argmax_f32__avx512: (AVX-512 F) identical with ref under contract argmax.f32.v1.
 *
 * Op: y[m] = index of the largest value of row m of x f32 [M, N] (row-major), as int32.
 * Ties go to the lowest index (+0.0 and -0.0 are equal). NaNs are ignored; a row of only NaNs
 * gives 0; a row whose largest non-NaN value is -inf gives the first -inf. Comparisons only, so
 * every variant returns the same index (SIMD: a NaN-ignoring vector max, then the first index
 * equal to it). N >= 1, N < 2^31. Partition: rows (km_part over M).
 */
#include <immintrin.h>
#include <math.h>

#include "km_common.h"

static int32_t argmax_row(const float *x, int64_t N) {
    __m512 vm = _mm512_set1_ps(-INFINITY);
    for (int64_t i = 0; i < N; i += 16) {
        const __mmask16 k = (N - i >= 16) ? (__mmask16)0xFFFF : (__mmask16)((1u << (N - i)) - 1u);
        vm = _mm512_mask_max_ps(vm, k, _mm512_maskz_loadu_ps(k, x + i), vm); /* NaN in x keeps vm */
    }
    const float best = _mm512_reduce_max_ps(vm);
    const __m512 vb = _mm512_set1_ps(best);
    for (int64_t i = 0; i < N; i += 16) {
        const __mmask16 k = (N - i >= 16) ? (__mmask16)0xFFFF : (__mmask16)((1u << (N - i)) - 1u);
        const __mmask16 eq = _mm512_mask_cmp_ps_mask(k, _mm512_maskz_loadu_ps(k, x + i), vb, _CMP_EQ_OQ);
        if (eq) return (int32_t)(i + __builtin_ctz((unsigned)eq));
    }
    return 0;
}

void km_argmax_f32__avx512(int32_t *y, const float *x, int64_t M, int64_t N, int ith, int nth) {
    int64_t lo, hi;
    km_part(M, ith, nth, &lo, &hi);
    for (int64_t m = lo; m < hi; m++) y[m] = argmax_row(x + m * N, N);
}
