/* common/km_kquant_x86.h — the AVX2 forms of km_kquant.h's folds, for the kernelmap-order K-quant x86
 * kernels (linear/q{4,6}_k_q8_k_avx*.c). Kept apart from km_kquant.h so that header stays ISA-free: the
 * K-quant family bodies include it, and a family body may not hold intrinsics (kernelmap.lkb.derive).
 */
#ifndef KM_KQUANT_X86_H
#define KM_KQUANT_X86_H

#include <immintrin.h>
#include <stdint.h>

#include "km_kquant.h"

/* Lane j of the result = t[j][0] + t[j][1] + t[j][2] + t[j][3] (exact int32); t 32-byte aligned. */
static inline __m256i km_kq_fold8(const int32_t t[8][4]) {
    const __m256i ab = _mm256_hadd_epi32(_mm256_load_si256((const __m256i *)t[0]),
                                         _mm256_load_si256((const __m256i *)t[2]));
    const __m256i cd = _mm256_hadd_epi32(_mm256_load_si256((const __m256i *)t[4]),
                                         _mm256_load_si256((const __m256i *)t[6]));
    return _mm256_permutevar8x32_epi32(_mm256_hadd_epi32(ab, cd), _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

/* km_kq_reduce8 on the 8 lanes of p: ((p0+p4)+(p2+p6)) + ((p1+p5)+(p3+p7)). */
static inline float km_kq_reduce8_ps(__m256 p) {
    __m128 a = _mm_add_ps(_mm256_castps256_ps128(p), _mm256_extractf128_ps(p, 1));
    a = _mm_add_ps(a, _mm_movehl_ps(a, a));
    return _mm_cvtss_f32(_mm_add_ss(a, _mm_movehdup_ps(a)));
}

#endif /* KM_KQUANT_X86_H */
