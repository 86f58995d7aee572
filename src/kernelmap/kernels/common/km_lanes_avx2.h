/* km_lanes_avx2.h — the lanes interface (km_lanes.h) on AVX2 + FMA + F16C.
 *
 * kl_f8 is one ymm; a row pair kl_f8x2 is two ymm (A, B). 32-element dots use vpmaddubsw/vpmaddwd:
 * q8_0 weights by the abs/sign trick (|w| * sign(x, w): int16 pair sums <= 2 * 127 * 128, exact), q5_0
 * as unsigned codes u = w + 16 against signed x with the activation-side seed 0x4B400000 - 16 * xs4
 * (xs4[l] = sum of lane l's four activation quants), which also turns the int32 lane into its float
 * by one subtract. Every integer step is exact, so the lanes equal the contract's exact sums.
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
    __m256i q;    /* the 32 activation quants */
    __m256i seed; /* 0x4B400000 - off * xs4 (off = the format's code offset) */
} kl_q32xb;

KL_INLINE void kl_q32xb_prep(kl_q32xb *p, const km_block_q8_0 *x, const int fmt) {
    p->q = _mm256_loadu_si256((const __m256i *)x->qs);
    p->seed = kl_x86_seed8(p->q, KL_Q32_OFF(fmt));
}

typedef __m256i kl_q32w; /* q8_0: the signed weights; q5_0: the unsigned codes */

KL_INLINE kl_q32w kl_q32w_load(const uint8_t *blk, const int fmt) {
    return fmt == KL_Q32_Q8_0 ? _mm256_loadu_si256((const __m256i *)(blk + 2)) : kl_x86_u_q5_0(blk);
}

KL_INLINE kl_f8 kl_q32_dot(kl_q32w w, const kl_q32xb *p, const km_block_q8_0 *x, const int fmt) {
    (void)x;
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

KL_INLINE kl_f8x2 kl_q32_dot2(kl_q32w2 w, const kl_q32xb *p, const km_block_q8_0 *x, const int fmt) {
    return (kl_f8x2){kl_q32_dot(w.a, p, x, fmt), kl_q32_dot(w.b, p, x, fmt)};
}

/* ---- native-width f32 (elementwise) ---- */

#define KL_FV_LANES 8

typedef __m256 kl_fv;
typedef __m256 kl_fvm; /* all-ones / all-zeros lanes */

KL_INLINE kl_fv kl_fv_zero(void) { return _mm256_setzero_ps(); }
KL_INLINE kl_fv kl_fv_set1(float s) { return _mm256_set1_ps(s); }
KL_INLINE kl_fv kl_fv_loadu(const float *p) { return _mm256_loadu_ps(p); }
KL_INLINE void kl_fv_storeu(float *p, kl_fv v) { _mm256_storeu_ps(p, v); }
KL_INLINE __m256i kl_avx2_first(int n) { return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)); }
KL_INLINE kl_fv kl_fv_loadn(const float *p, int n) { return _mm256_maskload_ps(p, kl_avx2_first(n)); }
KL_INLINE void kl_fv_storen(float *p, kl_fv v, int n) { _mm256_maskstore_ps(p, kl_avx2_first(n), v); }
KL_INLINE kl_fv kl_fv_add(kl_fv a, kl_fv b) { return _mm256_add_ps(a, b); }
KL_INLINE kl_fv kl_fv_sub(kl_fv a, kl_fv b) { return _mm256_sub_ps(a, b); }
KL_INLINE kl_fv kl_fv_mul(kl_fv a, kl_fv b) { return _mm256_mul_ps(a, b); }
KL_INLINE kl_fv kl_fv_div(kl_fv a, kl_fv b) { return _mm256_div_ps(a, b); }
KL_INLINE kl_fv kl_fv_fma(kl_fv a, kl_fv b, kl_fv c) { return _mm256_fmadd_ps(a, b, c); }
KL_INLINE kl_fv kl_fv_fms(kl_fv a, kl_fv b, kl_fv c) { return _mm256_fmsub_ps(a, b, c); }
KL_INLINE kl_fv kl_fv_fnma(kl_fv a, kl_fv b, kl_fv c) { return _mm256_fnmadd_ps(a, b, c); }
KL_INLINE kl_fv kl_fv_neg(kl_fv v) { return _mm256_xor_ps(v, _mm256_set1_ps(-0.0f)); }
KL_INLINE kl_fv kl_fv_abs(kl_fv v) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v); }
KL_INLINE kl_fv kl_fv_min(kl_fv a, kl_fv b) { return _mm256_min_ps(a, b); }
KL_INLINE kl_fv kl_fv_max(kl_fv a, kl_fv b) { return _mm256_max_ps(a, b); }
KL_INLINE kl_fv kl_fv_round(kl_fv v) { return _mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
KL_INLINE kl_fv kl_fv_exp2i(kl_fv v) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(v), _mm256_set1_epi32(127)), 23));
}
KL_INLINE kl_fv kl_fv_dup_even(kl_fv v) { return _mm256_moveldup_ps(v); }
KL_INLINE kl_fv kl_fv_dup_odd(kl_fv v) { return _mm256_movehdup_ps(v); }
KL_INLINE kl_fvm kl_fv_cmp_lt(kl_fv a, kl_fv b) { return _mm256_cmp_ps(a, b, _CMP_LT_OQ); }
KL_INLINE kl_fvm kl_fv_cmp_le(kl_fv a, kl_fv b) { return _mm256_cmp_ps(a, b, _CMP_LE_OQ); }
KL_INLINE kl_fvm kl_fv_cmp_ge(kl_fv a, kl_fv b) { return _mm256_cmp_ps(a, b, _CMP_GE_OQ); }
KL_INLINE kl_fvm kl_fv_cmp_eq(kl_fv a, kl_fv b) { return _mm256_cmp_ps(a, b, _CMP_EQ_OQ); }
KL_INLINE kl_fvm kl_fv_isnan(kl_fv v) { return _mm256_cmp_ps(v, v, _CMP_UNORD_Q); }
KL_INLINE kl_fv kl_fv_blend(kl_fv a, kl_fv b, kl_fvm m) { return _mm256_blendv_ps(a, b, m); }
KL_INLINE unsigned kl_fvm_bits(kl_fvm m) { return (unsigned)_mm256_movemask_ps(m); }
KL_INLINE float kl_fv_hmax(kl_fv v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    return _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
}

/* ---- f64 partials (reductions) ---- */

typedef struct {
    __m256d q[4]; /* partials 0-3, 4-7, 8-11, 12-15 */
} kl_d16;

KL_INLINE kl_d16 kl_d16_zero(void) { return (kl_d16){{_mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd()}}; }
KL_INLINE kl_d16 kl_d16_add_sq(kl_d16 a, const int j, kl_fv v) {
    const __m256 s = _mm256_mul_ps(v, v);
    a.q[j / 4] = _mm256_add_pd(a.q[j / 4], _mm256_cvtps_pd(_mm256_castps256_ps128(s)));
    a.q[j / 4 + 1] = _mm256_add_pd(a.q[j / 4 + 1], _mm256_cvtps_pd(_mm256_extractf128_ps(s, 1)));
    return a;
}
KL_INLINE double kl_d16_fold(kl_d16 a) {
    const __m256d h = _mm256_add_pd(_mm256_add_pd(a.q[0], a.q[2]), _mm256_add_pd(a.q[1], a.q[3])); /* + 8, + 4 */
    const __m128d q = _mm_add_pd(_mm256_castpd256_pd128(h), _mm256_extractf128_pd(h, 1));              /* + 2 */
    return _mm_cvtsd_f64(q) + _mm_cvtsd_f64(_mm_unpackhi_pd(q, q));
}

/* ---- int8 (quantized activations) ---- */

KL_INLINE kl_fv kl_fv_cvt_i8(const int8_t *p) { return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)p))); }
KL_INLINE int32_t kl_avx2_hsum(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
    return _mm_cvtsi128_si32(_mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1)));
}
KL_INLINE void kl_fv_store_i8x32(int8_t *p, const kl_fv *v, int32_t *s) {
    __m256i i[4];
    for (int k = 0; k < 4; k++) i[k] = _mm256_cvtps_epi32(v[k]); /* MXCSR's default: nearest, ties to even */
    const __m256i b = _mm256_packs_epi16(_mm256_packs_epi32(i[0], i[1]), _mm256_packs_epi32(i[2], i[3])); /* lane-interleaved */
    _mm256_storeu_si256((__m256i *)p, _mm256_permutevar8x32_epi32(b, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
    if (s) {
        s[0] = kl_avx2_hsum(_mm256_add_epi32(i[0], i[1]));
        s[1] = kl_avx2_hsum(_mm256_add_epi32(i[2], i[3]));
    }
}

/* ---- f16 conversion ---- */

KL_INLINE kl_fv kl_fv_load_f16(const uint16_t *p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)); }
KL_INLINE void kl_fv_store_f16(uint16_t *p, kl_fv v) {
    _mm_storeu_si128((__m128i *)p, _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}
KL_INLINE kl_fv kl_fv_f16_lut(const uint16_t *t, kl_fv v, const int clamp, const int neg) {
    const __m256i h = _mm256_cvtepu16_epi32(_mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    const __m256i mag = _mm256_min_epu32(_mm256_and_si256(h, _mm256_set1_epi32(0x7FFF)), _mm256_set1_epi32(clamp));
    const __m256i sgn = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_srli_epi32(h, 15));
    const __m256i idx = _mm256_add_epi32(mag, _mm256_and_si256(sgn, _mm256_set1_epi32(neg)));
    const __m256i e = _mm256_and_si256(_mm256_i32gather_epi32((const int *)(const void *)t, idx, 2), _mm256_set1_epi32(0xFFFF));
    return _mm256_cvtph_ps(_mm256_castsi256_si128(_mm256_permute4x64_epi64(_mm256_packus_epi32(e, e), 0x08)));
}

#endif /* KM_LANES_AVX2_H */
