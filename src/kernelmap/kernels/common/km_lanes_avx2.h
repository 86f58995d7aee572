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
/* ---- K-quant blocks ----
 * A half block is 4 ymm of unsigned codes, one 32-value chunk each (q3_K: codes of the low 2 bits plus
 * a ymm of 4 where the third bit is clear, subtracted after vpmaddubsw as llama.cpp does), and per chunk
 * the 16 int16 scales of its two 16-value halves. The dot is vpmaddubsw (pairs <= 2 * 63 * 128, no
 * saturation) then vpmaddwd by the scales: int32 lane l of a chunk is sc * (its 4 products at 4l..4l+3),
 * so a kl_kqi (one ymm) is already in contract-lane order. */

typedef struct {
    __m256i u[4]; /* codes of chunks 0..3 of the half */
    __m256i n[4]; /* q3_K: 4 where the code's third bit is clear */
    __m256i s[4]; /* scales: lanes 0-7 the chunk's first 16 values, 8-15 the next 16 */
} kl_kqw;

typedef __m256i kl_kqi;

KL_INLINE kl_kqi kl_kqi_zero(void) { return _mm256_setzero_si256(); }

KL_INLINE void kl_kqw_load(kl_kqw *w, const uint8_t *blk, kl_kqs s, const int fmt, const int h) {
    const __m256i m4 = _mm256_set1_epi8(0x0F), m3 = _mm256_set1_epi8(0x03);
    /* entries 8h .. 8h + 7 as int16 in both 128-bit halves; chunk c takes entry 2c in the low half and
     * 2c + 1 in the high half (one in-lane byte shuffle each) */
    const __m256i t = _mm256_broadcastsi128_si256(_mm_cvtepi8_epi16(h ? _mm_srli_si128(s, 8) : s));
    for (int c = 0; c < 4; c++) {
        const char a = (char)(4 * c), b = (char)(4 * c + 2);
        w->s[c] = _mm256_shuffle_epi8(t, _mm256_setr_epi8(a, (char)(a + 1), a, (char)(a + 1), a, (char)(a + 1), a,
                                                          (char)(a + 1), a, (char)(a + 1), a, (char)(a + 1), a,
                                                          (char)(a + 1), a, (char)(a + 1), b, (char)(b + 1), b,
                                                          (char)(b + 1), b, (char)(b + 1), b, (char)(b + 1), b,
                                                          (char)(b + 1), b, (char)(b + 1), b, (char)(b + 1), b,
                                                          (char)(b + 1)));
    }
    if (fmt == KL_KQ_Q2_K || fmt == KL_KQ_Q3_K) {
        const __m256i q = _mm256_loadu_si256((const __m256i *)(blk + (fmt == KL_KQ_Q2_K ? 16 : 32) + 32 * h));
        for (int c = 0; c < 4; c++) w->u[c] = _mm256_and_si256(_mm256_srli_epi16(q, 2 * c), m3);
        if (fmt == KL_KQ_Q3_K) {
            const __m256i hm = _mm256_loadu_si256((const __m256i *)blk);
            for (int c = 0; c < 4; c++) { /* the clear bit 4h + c of each hmask byte to bit 2: one shift (none for bit 2) */
                const int sh = 4 * h + c - 2;
                const __m256i clear = _mm256_andnot_si256(hm, _mm256_set1_epi8((char)(1 << (4 * h + c))));
                w->n[c] = sh > 0 ? _mm256_srli_epi16(clear, sh) : sh < 0 ? _mm256_slli_epi16(clear, -sh) : clear;
            }
        }
    } else if (fmt == KL_KQ_Q4_K || fmt == KL_KQ_Q5_K) {
        const uint8_t *qs = blk + (fmt == KL_KQ_Q4_K ? 16 : 48) + 64 * h;
        for (int g = 0; g < 2; g++) {
            const __m256i q = _mm256_loadu_si256((const __m256i *)(qs + 32 * g));
            w->u[2 * g] = _mm256_and_si256(q, m4);
            w->u[2 * g + 1] = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
        }
        if (fmt == KL_KQ_Q5_K) {
            const __m256i qh = _mm256_loadu_si256((const __m256i *)(blk + 16));
            const __m256i b16 = _mm256_set1_epi8(0x10);
            for (int c = 0; c < 4; c++) { /* bit 4h + c of each qh byte to bit 4: one shift (none for bit 4) */
                const int sh = 4 * h + c - 4;
                const __m256i a = sh > 0 ? _mm256_srli_epi16(qh, sh) : sh < 0 ? _mm256_slli_epi16(qh, -sh) : qh;
                w->u[c] = _mm256_or_si256(w->u[c], _mm256_and_si256(a, b16));
            }
        }
    } else { /* q6_K */
        const __m256i ql0 = _mm256_loadu_si256((const __m256i *)(blk + 64 * h));
        const __m256i ql1 = _mm256_loadu_si256((const __m256i *)(blk + 64 * h + 32));
        const __m256i qh = _mm256_loadu_si256((const __m256i *)(blk + 128 + 32 * h));
        for (int c = 0; c < 4; c++) {
            const __m256i ql = c & 1 ? ql1 : ql0;
            const __m256i lo = _mm256_and_si256(c & 2 ? _mm256_srli_epi16(ql, 4) : ql, m4);
            const int sh = 2 * c - 4; /* bits 2c, 2c + 1 of each qh byte to bits 4, 5: one shift (none for c = 2) */
            const __m256i a = sh > 0 ? _mm256_srli_epi16(qh, sh) : sh < 0 ? _mm256_slli_epi16(qh, -sh) : qh;
            w->u[c] = _mm256_or_si256(lo, _mm256_and_si256(a, _mm256_set1_epi8(0x30)));
        }
    }
}

KL_INLINE kl_kqi kl_kqi_seed(kl_kqs s, const km_block_q8_k *x, const int fmt) {
    return fmt == KL_KQ_Q6_K ? kl_x86_kq_seed8(s, x) : _mm256_setzero_si256();
}

KL_INLINE kl_kqi kl_kqi_dot(kl_kqi acc, const kl_kqw *w, const int8_t *xq, const int fmt) {
    for (int c = 0; c < 4; c++) {
        const __m256i x = _mm256_loadu_si256((const __m256i *)(xq + 32 * c));
        __m256i p = _mm256_maddubs_epi16(w->u[c], x);
        if (fmt == KL_KQ_Q3_K) p = _mm256_sub_epi16(p, _mm256_maddubs_epi16(w->n[c], x));
        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p, w->s[c]));
    }
    return acc;
}

KL_INLINE void kl_kqw_codes(int8_t *out, const kl_kqw *w, const int fmt) {
    for (int c = 0; c < 4; c++)
        _mm256_storeu_si256((__m256i *)(out + 32 * c), fmt == KL_KQ_Q3_K ? _mm256_sub_epi8(w->u[c], w->n[c]) : w->u[c]);
}

KL_INLINE kl_kqi kl_kqi_dott(kl_kqi acc, const kl_kqw *w, const int8_t *xq, const int fmt) {
    return kl_kqi_dot(acc, w, xq, fmt);
}

KL_INLINE kl_f8 kl_kqi_lanes(kl_kqi acc) { return _mm256_cvtepi32_ps(acc); }

KL_INLINE kl_f8x2 kl_kqi_lanes2(kl_kqi a, kl_kqi b) { return (kl_f8x2){_mm256_cvtepi32_ps(a), _mm256_cvtepi32_ps(b)}; }
KL_INLINE kl_f8x2 kl_f8x2_set2(float a, float b) { return (kl_f8x2){_mm256_set1_ps(a), _mm256_set1_ps(b)}; }
KL_INLINE kl_f8x2 kl_f8x2_mul(kl_f8x2 a, kl_f8x2 b) { return (kl_f8x2){_mm256_mul_ps(a.a, b.a), _mm256_mul_ps(a.b, b.b)}; }

KL_INLINE void kl_kqi_store4(int32_t *p, kl_kqi acc) {
    _mm_storeu_si128((__m128i *)p, _mm_add_epi32(_mm256_castsi256_si128(acc), _mm256_extracti128_si256(acc, 1)));
}

/* ---- flash attention (attention/ggmlfa_body.h) ---- */
KL_INLINE kl_fv kl_fv_rt16(kl_fv v) { return _mm256_cvtph_ps(_mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)); }

/* 4 lanes of expf's main path in double (the table by a gather) */
KL_INLINE __m128 kl_avx2_expf4(__m128 x) {
    const __m256d n = _mm256_set1_pd(KL_EXPF_N), shift = _mm256_set1_pd(KL_EXPF_SHIFT);
    const __m256d xd = _mm256_cvtps_pd(x);
    __m256d kd = _mm256_fmadd_pd(n, xd, shift);
    const __m256i ki = _mm256_castpd_si256(kd);
    kd = _mm256_sub_pd(kd, shift);
    const __m256d r = _mm256_fmsub_pd(n, xd, kd);
    __m256i t = _mm256_i64gather_epi64((const long long *)(const void *)kl_expf_tab, _mm256_and_si256(ki, _mm256_set1_epi64x(31)), 8);
    t = _mm256_add_epi64(t, _mm256_slli_epi64(ki, 47));
    const __m256d z = _mm256_fmadd_pd(r, _mm256_set1_pd(KL_EXPF_C0), _mm256_set1_pd(KL_EXPF_C1));
    const __m256d r2 = _mm256_mul_pd(r, r);
    __m256d y = _mm256_fmadd_pd(r, _mm256_set1_pd(KL_EXPF_C2), _mm256_set1_pd(1.0));
    y = _mm256_fmadd_pd(z, r2, y);
    y = _mm256_mul_pd(y, _mm256_castsi256_pd(t));
    return _mm256_cvtpd_ps(y);
}

KL_INLINE kl_fv kl_fv_expf(kl_fv x) {
    __m256 y = _mm256_set_m128(kl_avx2_expf4(_mm256_extractf128_ps(x, 1)), kl_avx2_expf4(_mm256_castps256_ps128(x)));
    const __m256i ax = _mm256_and_si256(_mm256_castps_si256(x), _mm256_set1_epi32(0x7fffffff));
    const int special = _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(ax, _mm256_set1_epi32((int)KL_EXPF_BIG))));
    if (__builtin_expect(special != 0, 0)) {
        float xs[8], ys[8];
        _mm256_storeu_ps(xs, x);
        _mm256_storeu_ps(ys, y);
        for (int l = 0; l < 8; l++) {
            if (special >> l & 1) ys[l] = __builtin_expf(xs[l]);
        }
        y = _mm256_loadu_ps(ys);
    }
    return y;
}

/* per key: 16 -> 8 -> 4 lanes by vector adds, then (l, l+2) and the last pair */
KL_INLINE void kl_fold16x16(float *s, const float *p) {
    for (int k = 0; k < 16; k++) {
        const __m256 h = _mm256_add_ps(_mm256_load_ps(p + 16 * k), _mm256_load_ps(p + 16 * k + 8));
        const __m128 q = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
        const __m128 u = _mm_add_ps(q, _mm_movehl_ps(q, q));
        s[k] = _mm_cvtss_f32(_mm_add_ss(u, _mm_shuffle_ps(u, u, 1)));
    }
}

/* v shifted up by sh lanes (-inf in) */
#define KL_AVX2_UP(v, sh, ninf) \
    _mm256_blend_ps(_mm256_permutevar8x32_ps((v), _mm256_and_si256(_mm256_setr_epi32(-(sh), 1 - (sh), 2 - (sh), 3 - (sh), \
        4 - (sh), 5 - (sh), 6 - (sh), 7 - (sh)), _mm256_set1_epi32(7))), (ninf), (1 << (sh)) - 1)
KL_INLINE kl_fv kl_fv_prefix_max(kl_fv v, float m) {
    const __m256 ninf = _mm256_set1_ps(-__builtin_inff());
    __m256 e = KL_AVX2_UP(v, 1, ninf);
    v = _mm256_blendv_ps(e, v, _mm256_cmp_ps(v, e, _CMP_GT_OQ));
    e = KL_AVX2_UP(v, 2, ninf);
    v = _mm256_blendv_ps(e, v, _mm256_cmp_ps(v, e, _CMP_GT_OQ));
    e = KL_AVX2_UP(v, 4, ninf);
    v = _mm256_blendv_ps(e, v, _mm256_cmp_ps(v, e, _CMP_GT_OQ));
    const __m256 x = KL_AVX2_UP(v, 1, ninf), mm = _mm256_set1_ps(m);
    return _mm256_blendv_ps(mm, x, _mm256_cmp_ps(x, mm, _CMP_GT_OQ));
}

/* w5-kq additions */

/* kl_kqw_loadf (km_lanes.h): kl_kqw_load is already this ISA's shortest unpack. */
KL_INLINE void kl_kqw_loadf(kl_kqw *w, const uint8_t *blk, kl_kqs s, const int fmt, const int h) {
    kl_kqw_load(w, blk, s, fmt, h);
}

/* w5-forks-lin additions */

/* 16-lane contract vectors: two ymm, lanes 0-7 and 8-15. */
typedef struct {
    __m256 lo, hi;
} kl_f16v;

KL_INLINE kl_f16v kl_f16v_zero(void) { return (kl_f16v){_mm256_setzero_ps(), _mm256_setzero_ps()}; }
KL_INLINE kl_f16v kl_f16v_set1(float s) { return (kl_f16v){_mm256_set1_ps(s), _mm256_set1_ps(s)}; }
KL_INLINE kl_f16v kl_f16v_loadu(const float *p) { return (kl_f16v){_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)}; }
KL_INLINE kl_f16v kl_f16v_loadn(const float *p, int n) {
    return (kl_f16v){_mm256_maskload_ps(p, kl_avx2_first(n)), _mm256_maskload_ps(p + 8, kl_avx2_first(n - 8))};
}
KL_INLINE kl_f16v kl_f16v_mul(kl_f16v a, kl_f16v b) { return (kl_f16v){_mm256_mul_ps(a.lo, b.lo), _mm256_mul_ps(a.hi, b.hi)}; }
KL_INLINE kl_f16v kl_f16v_fma(kl_f16v a, kl_f16v b, kl_f16v c) {
    return (kl_f16v){_mm256_fmadd_ps(a.lo, b.lo, c.lo), _mm256_fmadd_ps(a.hi, b.hi, c.hi)};
}
KL_INLINE kl_f16v kl_f16v_cvt_i8(const int8_t *p) {
    const __m128i q = _mm_loadu_si128((const __m128i *)p);
    return (kl_f16v){_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)), _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(q, 8)))};
}
KL_INLINE float kl_f16v_fold(kl_f16v v) { return kl_f8_fold(_mm256_add_ps(v.lo, v.hi)); }
KL_INLINE kl_f16v kl_f16v_add(kl_f16v a, kl_f16v b) { return (kl_f16v){_mm256_add_ps(a.lo, b.lo), _mm256_add_ps(a.hi, b.hi)}; }
KL_INLINE kl_f16v kl_f16v_load_f16(const uint16_t *p) { return (kl_f16v){kl_f8_load_f16(p), kl_f8_load_f16(p + 8)}; }
KL_INLINE kl_f16v kl_f16v_load_bf16(const uint16_t *p) { return (kl_f16v){kl_f8_load_bf16(p), kl_f8_load_bf16(p + 8)}; }
KL_INLINE kl_f16v kl_f16v_dpbf16(kl_f16v acc, const uint16_t *w, const uint16_t *x) {
    return (kl_f16v){kl_f8_dpbf16(acc.lo, w, x), kl_f8_dpbf16(acc.hi, w + 16, x + 16)};
}


/* Lane j = the sum of the eight int32 lanes of v[j] (wrapping adds: exact modulo 2^32). */
KL_INLINE __m256i kl_avx2_sum8i(const __m256i v[8]) {
    const __m256i h0123 = _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[3]));
    const __m256i h4567 = _mm256_hadd_epi32(_mm256_hadd_epi32(v[4], v[5]), _mm256_hadd_epi32(v[6], v[7]));
    return _mm256_add_epi32(_mm256_permute2x128_si256(h0123, h4567, 0x20), _mm256_permute2x128_si256(h0123, h4567, 0x31));
}

/* Block sums of one row: lanes of four products per block, summed in int32, converted once. Nibble formats
 * carry kl_q32xb's seed (0x4B400000 - off * xs4) in every lane; eight seeds are removed after the sum. */
KL_INLINE kl_f8 kl_avx2_isum8(const kl_q32w *w, int ws, const kl_q32xb *p, const int fmt, const int n) {
    const __m256i one = _mm256_set1_epi16(1);
    const int seeded = fmt != KL_Q32_Q8_0;
    __m256i v[8];
    for (int j = 0; j < 8; j++) {
        const __m256i wj = w[j * ws];
        if (j >= n) v[j] = seeded ? _mm256_set1_epi32(KL_MAGIC_I) : _mm256_setzero_si256();
        else if (!seeded) v[j] = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_sign_epi8(wj, wj), _mm256_sign_epi8(p[j].q, wj)), one);
        else v[j] = _mm256_add_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(wj, p[j].q), one), p[j].seed);
    }
    __m256i s = kl_avx2_sum8i(v);
    if (seeded) s = _mm256_sub_epi32(s, _mm256_set1_epi32((int32_t)(8u * (uint32_t)KL_MAGIC_I)));
    return _mm256_cvtepi32_ps(s);
}

/* Row pairs, 32-element blocks: lane c (c < n) of A / B = (float) the exact int32 sum of the 32 products of
 * w[c]'s row A / B against p[c] (kl_q32_dot2's products, all of a block); lanes >= n = +0. */
KL_INLINE kl_f8x2 kl_q32_isum8x2(const kl_q32w2 w[8], const kl_q32xb *p, const int fmt, const int n) {
    return (kl_f8x2){kl_avx2_isum8(&w[0].a, 2, p, fmt, n), kl_avx2_isum8(&w[0].b, 2, p, fmt, n)};
}

/* w5-forks-attn additions */

/* t = trunc(v), plus sign(v) when |v - t| >= 0.5 (v - t exact) */
KL_INLINE kl_fv kl_fv_round_away(kl_fv v) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    const __m256 t = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    const __m256 up = _mm256_cmp_ps(_mm256_andnot_ps(sign, _mm256_sub_ps(v, t)), _mm256_set1_ps(0.5f), _CMP_GE_OQ);
    return _mm256_add_ps(t, _mm256_and_ps(up, _mm256_or_ps(_mm256_and_ps(v, sign), _mm256_set1_ps(1.0f))));
}

KL_INLINE float kl_fv_fold_halves(kl_fv v) {
    const __m128 q = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    const __m128 r = _mm_add_ps(q, _mm_movehl_ps(q, q));
    return _mm_cvtss_f32(_mm_add_ss(r, _mm_shuffle_ps(r, r, 1)));
}

/* w6-gemm additions (km_lanes.h): column-lane int32, eight lanes; no VNNI here, so a 4-value dot is
 * vpmaddubsw then vpmaddwd (pair sums of codes <= 127 fit int16). */

#define KL_IV 1
typedef __m256i kl_iv;
KL_INLINE kl_iv kl_iv_zero(void) { return _mm256_setzero_si256(); }
KL_INLINE kl_iv kl_iv_load(const void *p) { return _mm256_load_si256((const __m256i *)p); }
KL_INLINE void kl_iv_store(void *p, kl_iv v) { _mm256_store_si256((__m256i *)p, v); }
KL_INLINE kl_iv kl_iv_add(kl_iv a, kl_iv b) { return _mm256_add_epi32(a, b); }
KL_INLINE kl_iv kl_iv_mullo(kl_iv a, kl_iv b) { return _mm256_mullo_epi32(a, b); }
/* The 4 bytes at p in every 32-bit lane. */
KL_INLINE __m256i kl_avx2_bcast32(const void *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}
KL_INLINE kl_iv kl_iv_dp4(kl_iv acc, kl_iv w, const int8_t *x) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(w, kl_avx2_bcast32(x)), _mm256_set1_epi16(1)));
}
#define KL_IV_DP4U 1
KL_INLINE kl_iv kl_iv_dp4u(kl_iv acc, kl_iv w, const uint8_t *x) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(kl_avx2_bcast32(x), w), _mm256_set1_epi16(1)));
}
KL_INLINE kl_iv kl_iv_dp4s(kl_iv acc, kl_iv w, const int8_t *x, kl_iv s) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(w, kl_avx2_bcast32(x)), s));
}
KL_INLINE kl_iv kl_iv_dp2w(kl_iv acc, kl_iv w, const int16_t *x) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(w, kl_avx2_bcast32(x)));
}
#define KL_IV_P16 1
KL_INLINE kl_iv kl_iv_p16(kl_iv acc, kl_iv w, const int8_t *x) {
    return _mm256_add_epi16(acc, _mm256_maddubs_epi16(w, kl_avx2_bcast32(x)));
}
KL_INLINE kl_iv kl_iv_madd16(kl_iv acc, kl_iv a, kl_iv b) { return _mm256_add_epi32(acc, _mm256_madd_epi16(a, b)); }
KL_INLINE kl_iv kl_iv_gather32(const uint8_t *p, int64_t stride, int n) {
    const __m256i idx = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32((int32_t)stride));
    return _mm256_mask_i32gather_epi32(_mm256_setzero_si256(), (const int *)(const void *)p, idx, kl_avx2_first(n), 1);
}
/* KL_IV_ROWS4 (km_lanes.h): out[t] lane c = the 4 bytes at p + c * stride + 4t (t < 4; rows c >= n read row n - 1):
 * 16 bytes of each of 8 rows, loaded two rows per ymm and transposed by 8 unpacks (4 gathers cost ~5% of the q5_0
 * prefill GEMM on Zen 3). */
#define KL_IV_ROWS4 1
KL_INLINE void kl_iv_rows4(kl_iv out[4], const uint8_t *p, int64_t stride, int n) {
    __m256i r[4];
    for (int c = 0; c < 4; c++) {
        const int a = c < n ? c : n - 1, b = c + 4 < n ? c + 4 : n - 1;
        r[c] = _mm256_loadu2_m128i((const __m128i *)(const void *)(p + b * stride), (const __m128i *)(const void *)(p + a * stride));
    }
    const __m256i t0 = _mm256_unpacklo_epi32(r[0], r[1]), t1 = _mm256_unpackhi_epi32(r[0], r[1]);
    const __m256i t2 = _mm256_unpacklo_epi32(r[2], r[3]), t3 = _mm256_unpackhi_epi32(r[2], r[3]);
    out[0] = _mm256_unpacklo_epi64(t0, t2);
    out[1] = _mm256_unpackhi_epi64(t0, t2);
    out[2] = _mm256_unpacklo_epi64(t1, t3);
    out[3] = _mm256_unpackhi_epi64(t1, t3);
}
KL_INLINE kl_iv kl_iv_nib_lo(kl_iv v) { return _mm256_and_si256(v, _mm256_set1_epi8(0x0F)); }
KL_INLINE kl_iv kl_iv_nib_hi(kl_iv v) { return _mm256_and_si256(_mm256_srli_epi32(v, 4), _mm256_set1_epi8(0x0F)); }
KL_INLINE kl_iv kl_iv_or(kl_iv a, kl_iv b) { return _mm256_or_si256(a, b); }
KL_INLINE kl_iv kl_iv_srl_and8(kl_iv v, const int n, const int m) {
    return _mm256_and_si256(_mm256_srli_epi32(v, n), _mm256_set1_epi8((char)m));
}
KL_INLINE kl_iv kl_iv_sll32(kl_iv v, const int n) { return _mm256_slli_epi32(v, n); }
KL_INLINE kl_fv kl_fv_cvt_iv(kl_iv v) { return _mm256_cvtepi32_ps(v); }
KL_INLINE kl_fv kl_fv_load(const float *p) { return _mm256_load_ps(p); }
KL_INLINE void kl_fv_store(float *p, kl_fv v) { _mm256_store_ps(p, v); }

/* w6-q32gemm additions (km_lanes.h; kl_q32_seeds, kl_q32_xsum and kl_f32_f16 are in km_lanes_x86.h) */

KL_INLINE kl_iv kl_iv_set1(int32_t s) { return _mm256_set1_epi32(s); }
KL_INLINE kl_iv kl_iv_xor(kl_iv a, kl_iv b) { return _mm256_xor_si256(a, b); }
KL_INLINE kl_iv kl_iv_bitbytes(kl_iv h, int s, uint8_t v) {
    const __m256i lo = _mm256_srl_epi32(h, _mm_cvtsi32_si128(s)); /* bits s.. of each lane at bit 0 */
    const __m256i b0 = _mm256_shuffle_epi8(lo, _mm256_setr_epi8(0, 0, 0, 0, 4, 4, 4, 4, 8, 8, 8, 8, 12, 12, 12, 12, 0, 0, 0,
                                                                0, 4, 4, 4, 4, 8, 8, 8, 8, 12, 12, 12, 12)); /* byte 0 x 4 */
    const __m256i bit = _mm256_set1_epi32(0x08040201); /* byte j: bit j */
    const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(b0, bit), bit);
    return _mm256_and_si256(set, _mm256_set1_epi8((char)v));
}
KL_INLINE kl_fv kl_fv_f16s(const uint8_t *p, int64_t stride, int n) {
    const __m256i g = _mm256_and_si256(kl_iv_gather32(p, stride, n), _mm256_set1_epi32(0xFFFF));
    const __m256i h = _mm256_permute4x64_epi64(_mm256_packus_epi32(g, _mm256_setzero_si256()), 0x08); /* lanes 0-7 */
    return _mm256_cvtph_ps(_mm256_castsi256_si128(h));
}
KL_INLINE kl_fv kl_fv_unmagic(kl_iv v) { return _mm256_sub_ps(_mm256_castsi256_ps(v), _mm256_set1_ps(KL_MAGIC_F)); }

/* q32_r8 GEMM additions (km_lanes.h): a q32_r8 tile's 8 rows unpacked into column lanes (lane c = row c); one group
 * fills the 8 lanes, so gstride (the second group's offset on 16-lane headers) is not read. */
#define KL_IV_R8 1
KL_INLINE void kl_iv_r8_nib(kl_iv out[8], const uint8_t *p, int64_t gstride) {
    (void)gstride;
    __m256i r[8];
    for (int c = 0; c < 8; c++) r[c] = _mm256_loadu_si256((const __m256i *)(const void *)(p + 32 * c));
    /* an 8 x 8 dword transpose: pairs of rows, then quads, then the 128-bit halves */
    const __m256i a0 = _mm256_unpacklo_epi32(r[0], r[1]), a1 = _mm256_unpackhi_epi32(r[0], r[1]);
    const __m256i a2 = _mm256_unpacklo_epi32(r[2], r[3]), a3 = _mm256_unpackhi_epi32(r[2], r[3]);
    const __m256i a4 = _mm256_unpacklo_epi32(r[4], r[5]), a5 = _mm256_unpackhi_epi32(r[4], r[5]);
    const __m256i a6 = _mm256_unpacklo_epi32(r[6], r[7]), a7 = _mm256_unpackhi_epi32(r[6], r[7]);
    const __m256i b0 = _mm256_unpacklo_epi64(a0, a2), b1 = _mm256_unpackhi_epi64(a0, a2); /* rows 0-3: dwords 0|4, 1|5 */
    const __m256i b2 = _mm256_unpacklo_epi64(a1, a3), b3 = _mm256_unpackhi_epi64(a1, a3); /* 2|6, 3|7 */
    const __m256i b4 = _mm256_unpacklo_epi64(a4, a6), b5 = _mm256_unpackhi_epi64(a4, a6); /* rows 4-7 */
    const __m256i b6 = _mm256_unpacklo_epi64(a5, a7), b7 = _mm256_unpackhi_epi64(a5, a7);
    out[0] = _mm256_permute2x128_si256(b0, b4, 0x20);
    out[4] = _mm256_permute2x128_si256(b0, b4, 0x31);
    out[1] = _mm256_permute2x128_si256(b1, b5, 0x20);
    out[5] = _mm256_permute2x128_si256(b1, b5, 0x31);
    out[2] = _mm256_permute2x128_si256(b2, b6, 0x20);
    out[6] = _mm256_permute2x128_si256(b2, b6, 0x31);
    out[3] = _mm256_permute2x128_si256(b3, b7, 0x20);
    out[7] = _mm256_permute2x128_si256(b3, b7, 0x31);
}
KL_INLINE kl_iv kl_iv_r8_bit(const uint8_t *h, int64_t gstride, int l) {
    (void)gstride; /* lane c: the dword shifted right by c puts every byte's bit c on its bit 0 */
    const __m256i v = _mm256_srlv_epi32(kl_avx2_bcast32(h + 4 * l), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    return _mm256_slli_epi32(_mm256_and_si256(v, _mm256_set1_epi8(1)), 4);
}
KL_INLINE kl_fv kl_fv_r8_f16(const uint8_t *p, int64_t gstride) {
    (void)gstride;
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)p));
}

/* ---- q3_K's decode dot (linear/q_k_vecdot_ggml_body.h's kqv_row1_q3; km_lanes.h's KL_KQ3X ops) ----
 * As km_lanes_avx512.h's without VNNI: the code q = u - 4 [third bit clear] is dotted as the unsigned
 * u + 4 [third bit set] (0..7), and the activation's -4 * (pair sums) (int16, made once per activation block)
 * are added to vpmaddubsw's pairs (<= 2 * 7 * 128) before vpmaddwd by the scales: every int16 pair is the one
 * kl_kqi_dot forms (exact), so the contract lanes are unchanged; one vpmaddubsw fewer per 32 values. */
#define KL_KQ3X 1

typedef struct {
    __m256i v[8]; /* v[4h + c]: -4 * the 16 pair sums of xq[128h + 32c .. + 31] (int16) */
} kl_kq3x;

KL_INLINE void kl_kq3x_load(kl_kq3x *o, const km_block_q8_k *xb) {
    for (int i = 0; i < 8; i++)
        o->v[i] = _mm256_sub_epi16(_mm256_setzero_si256(),
                                   _mm256_maddubs_epi16(_mm256_set1_epi8(4), _mm256_loadu_si256((const __m256i *)(xb->qs + 32 * i))));
}

/* q3_K's half h for kl_kqi_dot_q3x: u[c] = the codes + 4 (0..7), s[c] = kl_kqw_load's scales. */
KL_INLINE void kl_kqw_load_q3x(kl_kqw *w, const uint8_t *blk, kl_kqs s, const int h) {
    kl_kqw_load(w, blk, s, KL_KQ_Q3_K, h); /* the scales and the two low bits (n[] is not used) */
    const __m256i hm = _mm256_loadu_si256((const __m256i *)blk);
    for (int c = 0; c < 4; c++) { /* the set bit 4h + c of each hmask byte to bit 2: + 4 */
        const int sh = 4 * h + c - 2;
        const __m256i a = sh > 0 ? _mm256_srli_epi16(hm, sh) : sh < 0 ? _mm256_slli_epi16(hm, -sh) : hm;
        w->u[c] = _mm256_or_si256(w->u[c], _mm256_and_si256(a, _mm256_set1_epi8(4)));
    }
}

/* kl_kqi_dot of q3_K's half h (w from kl_kqw_load_q3x) with the activation block's kl_kq3x c: the same
 * contract lanes, each exact. */
KL_INLINE kl_kqi kl_kqi_dot_q3x(kl_kqi acc, const kl_kqw *w, const int8_t *xq, const kl_kq3x *c, const int h) {
    for (int k = 0; k < 4; k++) {
        const __m256i x = _mm256_loadu_si256((const __m256i *)(xq + 32 * k));
        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_add_epi16(_mm256_maddubs_epi16(w->u[k], x), c->v[4 * h + k]), w->s[k]));
    }
    return acc;
}

#endif /* KM_LANES_AVX2_H */
