/* argmax/f32_avx2.c — km_argmax_f32__avx2: (AVX2) identical with ref under contract argmax.f32.v1.
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
    __m256 vm = _mm256_set1_ps(-INFINITY);
    int64_t i = 0;
    for (; i + 8 <= N; i += 8) vm = _mm256_max_ps(_mm256_loadu_ps(x + i), vm); /* NaN in x keeps vm */
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(vm), _mm256_extractf128_ps(vm, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_shuffle_ps(m4, m4, 1));
    float best = _mm_cvtss_f32(m4);
    for (; i < N; i++) {
        if (x[i] > best) best = x[i];
    }
    const __m256 vb = _mm256_set1_ps(best);
    i = 0;
    for (; i + 8 <= N; i += 8) {
        const int mask = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + i), vb, _CMP_EQ_OQ));
        if (mask) return (int32_t)(i + __builtin_ctz((unsigned)mask));
    }
    for (; i < N; i++) {
        if (x[i] == best) return (int32_t)i;
    }
    return 0;
}

void km_argmax_f32__avx2(int32_t *y, const float *x, int64_t M, int64_t N, int ith, int nth) {
    int64_t lo, hi;
    km_part(M, ith, nth, &lo, &hi);
    for (int64_t m = lo; m < hi; m++) y[m] = argmax_row(x + m * N, N);
}
