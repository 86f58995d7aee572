/* km_lanes_avx2.h — the lanes interface (km_lanes.h) on AVX2 + FMA + F16C.
 *
 * kl_f8 is one ymm; a row pair kl_f8x2 is two ymm (A, B). 32-element dots use vpmaddubsw/vpmaddwd:
 * q8_0 weights by the abs/sign trick (|w| * sign(x, w): int16 pair sums <= 2 * 127 * 128, exact), the
 * nibble formats as unsigned codes u = w + off (q4_0 off 8, q5_0 off 16, q4_1 / q5_1 off 0) against signed
 * x with the activation-side seed 0x4B400000 - off * xs4 (xs4[l] = sum of lane l's four activation
 * quants), which also turns the int32 lane into its float by one subtract. Every integer step is exact
 * (int16 pair sums <= 2 * 31 * 128), so the lanes equal the contract's exact sums.
 */
#ifndef KM_LANES_AVX2_H
#define KM_LANES_AVX2_H

#include <immintrin.h>

#include "km_lanes.h"
#include "km_lanes_x86.h"

#define KL_ISA_NAME "avx2"

typedef struct {
    __m256 a, b;
} kl_f8x2;

KL_INLINE kl_f8x2 kl_f8x2_zero(void) { return (kl_f8x2){_mm256_setzero_ps(), _mm256_setzero_ps()}; }
KL_INLINE kl_f8x2 kl_f8x2_fma(kl_f8x2 a, kl_f8x2 b, kl_f8x2 c) {
    return (kl_f8x2){_mm256_fmadd_ps(a.a, b.a, c.a), _mm256_fmadd_ps(a.b, b.b, c.b)};
}
KL_INLINE kl_f8x2 kl_f8x2_loadu(const float *p) { return (kl_f8x2){_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)}; }
KL_INLINE void kl_f8x2_storeu(float *p, kl_f8x2 v) {
    _mm256_storeu_ps(p, v.a);
    _mm256_storeu_ps(p + 8, v.b);
}
KL_INLINE kl_f8x2 kl_f8x2_f16s(const uint8_t *pa, const uint8_t *pb, int64_t stride, int n) {
    return (kl_f8x2){kl_f8_f16s(pa, stride, n), kl_f8_f16s(pb, stride, n)};
}
KL_INLINE kl_f8x2 kl_f8x2_mul_f8(kl_f8x2 d, kl_f8 x) { return (kl_f8x2){_mm256_mul_ps(d.a, x), _mm256_mul_ps(d.b, x)}; }
KL_INLINE kl_f8x2 kl_f8x2_bcast(kl_f8x2 v, int j) { return (kl_f8x2){kl_f8_bcast(v.a, j), kl_f8_bcast(v.b, j)}; }
KL_INLINE kl_f8x2 kl_f8x2_bcast_mem(const float *p, int j) {
    return (kl_f8x2){_mm256_broadcast_ss(p + j), _mm256_broadcast_ss(p + 8 + j)};
}
KL_INLINE void kl_f8x2_fold(kl_f8x2 v, float *a, float *b) {
    *a = kl_f8_fold(v.a);
    *b = kl_f8_fold(v.b);
}

/* ---- 32-element blocks ---- */

typedef struct {
    __m256i q;        /* the 32 activation quants */
    __m256i seed;     /* 0x4B400000 - off * xs4 (off = the format's code offset) */
    __m256i lo2, hi2; /* quants 0-15 and 16-31, each in both 128-bit halves (kl_q32_dot8) */
    int32_t xsum;     /* the sum of the 32 quants (kl_q32_dot8 of a format with an offset) */
} kl_q32xb;

KL_INLINE void kl_q32xb_prep(kl_q32xb *p, const int8_t *qs, const int fmt) {
    p->q = _mm256_loadu_si256((const __m256i *)qs);
    p->seed = kl_x86_seed8(p->q, KL_Q32_OFF(fmt));
    kl_x86_prep_dot8(&p->lo2, &p->hi2, &p->xsum, qs, fmt);
}

typedef __m256i kl_q32w; /* q8_0: the signed weights; nibble formats: the unsigned codes */

KL_INLINE kl_q32w kl_q32w_load(const uint8_t *blk, const int fmt) {
    return fmt == KL_Q32_Q8_0 ? _mm256_loadu_si256((const __m256i *)(blk + 2)) : kl_x86_u_q32(blk, fmt);
}

KL_INLINE kl_f8 kl_q32_dot(kl_q32w w, const kl_q32xb *p, const int fmt) {
    const __m256i one = _mm256_set1_epi16(1);
    if (fmt == KL_Q32_Q8_0)
        return _mm256_cvtepi32_ps(_mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_sign_epi8(w, w),
                                                                         _mm256_sign_epi8(p->q, w)), one));
    const __m256i s = _mm256_madd_epi16(_mm256_maddubs_epi16(w, p->q), one);
    return _mm256_sub_ps(_mm256_castsi256_ps(_mm256_add_epi32(s, p->seed)), _mm256_set1_ps(KL_MAGIC_F));
}

typedef struct {
    kl_q32w a, b;
} kl_q32w2;

KL_INLINE kl_q32w2 kl_q32w2_load(const uint8_t *a, const uint8_t *b, const int fmt) {
    return (kl_q32w2){kl_q32w_load(a, fmt), kl_q32w_load(b, fmt)};
}

KL_INLINE kl_f8x2 kl_q32_dot2(kl_q32w2 w, const kl_q32xb *p, const int fmt) {
    return (kl_f8x2){kl_q32_dot(w.a, p, fmt), kl_q32_dot(w.b, p, fmt)};
}

KL_INLINE kl_f8 kl_q32_dot8(const uint8_t *const *rows, int64_t off, const kl_q32xb *p, const int fmt) {
    if (KL_Q32_QH(fmt) >= 0 || fmt == KL_Q32_Q8_0) {
        kl_f8 f[8];
        for (int c = 0; c < 8; c++) f[c] = kl_q32_dot(kl_q32w_load(rows[c] + off, fmt), p, fmt);
        return kl_f8_sum8(f);
    }
    return kl_x86_dot8_nibbles(rows, off + KL_Q32_QS(fmt), p->lo2, p->hi2, p->xsum, KL_Q32_OFF(fmt));
}

#endif /* KM_LANES_AVX2_H */
