/* km_lanes_avx512.h — the lanes interface (km_lanes.h) on AVX-512 F/BW/VL/DQ (+ F16C, FMA, BMI2), with
 * VNNI dot products when the including file is compiled with -mavx512vnni, and with vdpbf16ps for
 * kl_f8_dpbf16 when it is compiled with -mavx512bf16 (the float-format ops are in km_lanes_x86.h).
 *
 * kl_f8 is one ymm (as on AVX2). A row pair kl_f8x2 is one zmm whose lanes interleave the two contract
 * vectors: lane 2l = A[l], lane 2l + 1 = B[l]. The pair's weights are interleaved per 4-byte group and
 * each activation block is re-laid with every 4-byte group doubled, so one 512-bit integer dot gives
 * both rows' eight lanes; the fold adds the halves, quarters and pairs exactly as kl_f8_fold does.
 * 32-element dots:
 *   without VNNI: vpmaddubsw/vpmaddwd, q8_0 by |w| and x negated where w < 0 (exact), the nibble formats
 *     as the unsigned code against signed x with the activation-side seed 0x4B400000 - off * xs4 (off the
 *     format's code offset: q4_0 8, q5_0 16, q4_1 / q5_1 0);
 *   with VNNI, pairs: vpdpbusd with x + 128 (x ^ 0x80) as the unsigned operand and signed weights
 *     (code - off, q8_0 int8), seeded with 0x4B400000 - 128 * ws4 (ws4 = sum of lane l's four
 *     weights; once per weight block, reused by every activation row);
 *   with VNNI, single rows: vpdpbusd with the unsigned weight code (q8_0 w ^ 0x80, nibble formats the
 *     code) against signed x, seeded with 0x4B400000 - off * xs4 (off 128 for q8_0, else the code offset);
 *     decode row pairs (kl_q32p) the same on interleaved lanes, the 4-bit formats' high nibbles left in
 *     place as 16 * code and seeded with 0x49400000 - 16 * off * xs4 (ulp 1/16 there: the float is exact).
 * In every case the int32 lane is exact (|lane| < 2^16 plus seed terms < 2^22), and bits(lane) - 1.5*2^23
 * is its exact float.
 */
#ifndef KM_LANES_AVX512_H
#define KM_LANES_AVX512_H

#include <immintrin.h>

#include "km_lanes.h"
#include "km_lanes_x86.h"

#if defined(__AVX512VNNI__)
#define KL_VNNI 1
#else
#define KL_VNNI 0
#endif
#if defined(__AVX512BF16__)
#define KL_ISA_NAME "avx512bf16"
#elif defined(__AVX512VNNI__)
#define KL_ISA_NAME "avx512vnni"
#else
#define KL_ISA_NAME "avx512"
#endif

typedef __m512 kl_f8x2;

/* Lane order of a pair: (A0 B0 A1 B1 ... A7 B7) from A in the low and B in the high 256 bits. */
#define KL_AVX512_IL _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0)

KL_INLINE kl_f8x2 kl_f8x2_zero(void) { return _mm512_setzero_ps(); }
KL_INLINE kl_f8x2 kl_f8x2_fma(kl_f8x2 a, kl_f8x2 b, kl_f8x2 c) { return _mm512_fmadd_ps(a, b, c); }
KL_INLINE kl_f8x2 kl_f8x2_loadu(const float *p) { return _mm512_loadu_ps(p); }
KL_INLINE void kl_f8x2_storeu(float *p, kl_f8x2 v) { _mm512_storeu_ps(p, v); }
KL_INLINE kl_f8x2 kl_f8x2_f16s(const uint8_t *pa, const uint8_t *pb, int64_t stride, int n) {
    return _mm512_permutex2var_ps(_mm512_castps256_ps512(kl_f8_f16s(pa, stride, n)), KL_AVX512_IL,
                                  _mm512_castps256_ps512(kl_f8_f16s(pb, stride, n)));
}
KL_INLINE kl_f8x2 kl_f8x2_mul_f8(kl_f8x2 d, kl_f8 x) {
    const __m512i dup = _mm512_set_epi32(7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0);
    return _mm512_mul_ps(d, _mm512_permutexvar_ps(dup, _mm512_castps256_ps512(x)));
}
KL_INLINE kl_f8x2 kl_f8x2_bcast(kl_f8x2 v, int j) {
    return _mm512_castpd_ps(_mm512_permutexvar_pd(_mm512_set1_epi64(j), _mm512_castps_pd(v)));
}
KL_INLINE kl_f8x2 kl_f8x2_bcast_mem(const float *p, int j) {
    return _mm512_castpd_ps(_mm512_broadcastsd_pd(_mm_load_sd((const double *)(p + 2 * j))));
}
KL_INLINE void kl_f8x2_fold(kl_f8x2 v, float *a, float *b) {
    const __m256 h = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1)); /* lane l+4 */
    const __m128 g = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));     /* 0+2, 1+3 */
    const __m128 s = _mm_add_ps(g, _mm_movehl_ps(g, g));                                     /* (0+2)+(1+3) */
    float o[4];
    _mm_storeu_ps(o, s);
    *a = o[0];
    *b = o[1];
}

/* ---- 32-element blocks ---- */

typedef struct {
    __m512i q2;       /* the 32 quants, every 4-byte group doubled (x ^ 0x80 with VNNI) */
    __m512i seed2;    /* without VNNI: 0x4B400000 - off * xs4, doubled (nibble-format pairs) */
    __m256i q;        /* the 32 quants */
    __m256i seed;     /* single rows: 0x4B400000 - off1 * xs4 (off1: the code offset; 128 for q8_0 with VNNI) */
    __m256i lo2, hi2; /* quants 0-15 and 16-31, each in both 128-bit halves (kl_q32_dot8) */
    int32_t xsum;     /* the sum of the 32 quants (kl_q32_dot8 of a format with an offset) */
    __m512i q2d;      /* decode pairs (kl_q32p_dot): the 32 quants as they are, every 4-byte group doubled */
    __m512i seedd;    /* decode pairs: seed doubled; with VNNI the 4-bit formats' lanes 8-15 (quants 16-31, the
                       * high nibbles kept as 16 * code) hold 0x49400000 - 16 * off * xs4 */
} kl_q32xb;

KL_INLINE void kl_q32xb_prep(kl_q32xb *p, const int8_t *qs, const int fmt) {
    const __m512i dup = _mm512_set_epi32(7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0);
    const __m256i q = _mm256_loadu_si256((const __m256i *)qs);
    const __m256i seed = kl_x86_seed8(q, KL_Q32_OFF(fmt));
    p->q = q;
    p->seed = KL_VNNI && fmt == KL_Q32_Q8_0 ? kl_x86_seed8(q, 128) : seed;
    p->seed2 = _mm512_permutexvar_epi32(dup, _mm512_castsi256_si512(seed));
    const __m256i qp = KL_VNNI ? _mm256_xor_si256(q, _mm256_set1_epi8((char)0x80)) : q;
    p->q2 = _mm512_permutexvar_epi32(dup, _mm512_castsi256_si512(qp));
    p->q2d = _mm512_permutexvar_epi32(dup, _mm512_castsi256_si512(q));
    p->seedd = _mm512_permutexvar_epi32(dup, _mm512_castsi256_si512(p->seed));
    if (KL_VNNI && fmt != KL_Q32_Q8_0 && KL_Q32_QH(fmt) < 0) /* MAGIC - off * xs4 -> 0x49400000 - 16 * off * xs4 */
        p->seedd = _mm512_mask_sub_epi32(
            p->seedd, (__mmask16)0xFF00, _mm512_set1_epi32(0x49400000),
            _mm512_slli_epi32(_mm512_sub_epi32(_mm512_set1_epi32(KL_MAGIC_I), p->seedd), 4));
    kl_x86_prep_dot8(&p->lo2, &p->hi2, &p->xsum, qs, fmt);
}

typedef __m256i kl_q32w; /* single rows: q8_0 signed (unsigned w ^ 0x80 with VNNI); nibble formats unsigned codes */

KL_INLINE kl_q32w kl_q32w_load(const uint8_t *blk, const int fmt) {
    if (fmt == KL_Q32_Q8_0) {
        const __m256i w = _mm256_loadu_si256((const __m256i *)(blk + 2));
        return KL_VNNI ? _mm256_xor_si256(w, _mm256_set1_epi8((char)0x80)) : w;
    }
    return kl_x86_u_q32(blk, fmt);
}

KL_INLINE kl_f8 kl_q32_dot(kl_q32w w, const kl_q32xb *p, const int fmt) {
    const __m256 magic = _mm256_set1_ps(KL_MAGIC_F);
#if defined(__AVX512VNNI__)
    (void)fmt;
    return _mm256_sub_ps(_mm256_castsi256_ps(_mm256_dpbusd_epi32(p->seed, w, p->q)), magic);
#else
    const __m256i one = _mm256_set1_epi16(1);
    if (fmt == KL_Q32_Q8_0)
        return _mm256_cvtepi32_ps(_mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_abs_epi8(w), _mm256_sign_epi8(p->q, w)),
                                                    one));
    const __m256i s = _mm256_madd_epi16(_mm256_maddubs_epi16(w, p->q), one);
    return _mm256_sub_ps(_mm256_castsi256_ps(_mm256_add_epi32(s, p->seed)), magic);
#endif
}

typedef struct {
    __m512i w;     /* rows A, B interleaved per 4-byte group: signed (VNNI; q8_0 without) or unsigned codes */
    __m512i aux;   /* VNNI: the seed 0x4B400000 - 128 * ws4; q8_0 without VNNI: |w| */
    __mmask64 neg; /* q8_0 without VNNI: where w < 0 */
} kl_q32w2;

KL_INLINE kl_q32w2 kl_q32w2_load(const uint8_t *a, const uint8_t *b, const int fmt) {
    kl_q32w2 r;
    if (fmt == KL_Q32_Q8_0) {
        r.w = _mm512_permutex2var_epi32(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(a + 2))),
                                        KL_AVX512_IL,
                                        _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(b + 2))));
    } else {
        /* nibble formats: qs dwords interleaved, low nibbles in the low 256 bits, high nibbles in the high
         * 256 bits; element e of A sits at byte 8 * (e / 4) + e % 4, of B 4 bytes later: 5th bits by pdep. */
        const __m128i qa = _mm_loadu_si128((const __m128i *)(a + KL_Q32_QS(fmt)));
        const __m128i qb = _mm_loadu_si128((const __m128i *)(b + KL_Q32_QS(fmt)));
        const __m256i c = _mm256_set_m128i(_mm_unpackhi_epi32(qa, qb), _mm_unpacklo_epi32(qa, qb));
        __m512i z = _mm512_inserti64x4(_mm512_castsi256_si512(c), c, 1);
        z = _mm512_srlv_epi16(z, _mm512_set_epi64(0x0004000400040004LL, 0x0004000400040004LL, 0x0004000400040004LL,
                                                  0x0004000400040004LL, 0, 0, 0, 0));
        z = _mm512_and_si512(z, _mm512_set1_epi8(0x0F));
        if (KL_Q32_QH(fmt) >= 0) {
            uint32_t ha, hb;
            memcpy(&ha, a + KL_Q32_QH(fmt), 4);
            memcpy(&hb, b + KL_Q32_QH(fmt), 4);
            const uint64_t m = _pdep_u64(ha, 0x0F0F0F0F0F0F0F0FULL) | _pdep_u64(hb, 0xF0F0F0F0F0F0F0F0ULL);
            z = _mm512_mask_add_epi8(z, (__mmask64)m, z, _mm512_set1_epi8(0x10)); /* the unsigned codes */
        }
        r.w = KL_VNNI && KL_Q32_OFF(fmt) ? _mm512_sub_epi8(z, _mm512_set1_epi8((char)KL_Q32_OFF(fmt))) : z;
    }
#if defined(__AVX512VNNI__)
    const __m512i ws4 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(1), r.w);
    r.aux = _mm512_sub_epi32(_mm512_set1_epi32(KL_MAGIC_I), _mm512_slli_epi32(ws4, 7));
    r.neg = 0;
#else
    if (fmt == KL_Q32_Q8_0) {
        r.neg = _mm512_movepi8_mask(r.w);
        r.aux = _mm512_abs_epi8(r.w);
    } else {
        r.neg = 0;
        r.aux = r.w;
    }
#endif
    return r;
}

KL_INLINE kl_f8x2 kl_q32_dot2(kl_q32w2 w, const kl_q32xb *p, const int fmt) {
    const __m512 magic = _mm512_set1_ps(KL_MAGIC_F);
#if defined(__AVX512VNNI__)
    (void)fmt;
    return _mm512_sub_ps(_mm512_castsi512_ps(_mm512_dpbusd_epi32(w.aux, p->q2, w.w)), magic);
#else
    const __m512i one = _mm512_set1_epi16(1);
    if (fmt == KL_Q32_Q8_0) {
        const __m512i xs = _mm512_mask_sub_epi8(p->q2, w.neg, _mm512_setzero_si512(), p->q2);
        return _mm512_cvtepi32_ps(_mm512_madd_epi16(_mm512_maddubs_epi16(w.aux, xs), one));
    }
    const __m512i s = _mm512_madd_epi16(_mm512_maddubs_epi16(w.w, p->q2), one);
    return _mm512_sub_ps(_mm512_castsi512_ps(_mm512_add_epi32(s, p->seed2)), magic);
#endif
}

/* ---- native-width f32 (elementwise) ---- */

#define KL_FV_LANES 16

typedef __m512 kl_fv;
typedef __mmask16 kl_fvm;

KL_INLINE kl_fv kl_fv_zero(void) { return _mm512_setzero_ps(); }
KL_INLINE kl_fv kl_fv_set1(float s) { return _mm512_set1_ps(s); }
KL_INLINE kl_fv kl_fv_loadu(const float *p) { return _mm512_loadu_ps(p); }
KL_INLINE void kl_fv_storeu(float *p, kl_fv v) { _mm512_storeu_ps(p, v); }
KL_INLINE __mmask16 kl_avx512_first(int n) { return n >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << n) - 1u); }
KL_INLINE kl_fv kl_fv_loadn(const float *p, int n) { return _mm512_maskz_loadu_ps(kl_avx512_first(n), p); }
KL_INLINE void kl_fv_storen(float *p, kl_fv v, int n) { _mm512_mask_storeu_ps(p, kl_avx512_first(n), v); }
KL_INLINE kl_fv kl_fv_add(kl_fv a, kl_fv b) { return _mm512_add_ps(a, b); }
KL_INLINE kl_fv kl_fv_sub(kl_fv a, kl_fv b) { return _mm512_sub_ps(a, b); }
KL_INLINE kl_fv kl_fv_mul(kl_fv a, kl_fv b) { return _mm512_mul_ps(a, b); }
KL_INLINE kl_fv kl_fv_div(kl_fv a, kl_fv b) { return _mm512_div_ps(a, b); }
KL_INLINE kl_fv kl_fv_fma(kl_fv a, kl_fv b, kl_fv c) { return _mm512_fmadd_ps(a, b, c); }
KL_INLINE kl_fv kl_fv_fms(kl_fv a, kl_fv b, kl_fv c) { return _mm512_fmsub_ps(a, b, c); }
KL_INLINE kl_fv kl_fv_fnma(kl_fv a, kl_fv b, kl_fv c) { return _mm512_fnmadd_ps(a, b, c); }
KL_INLINE kl_fv kl_fv_neg(kl_fv v) {
    return _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(v), _mm512_set1_epi32((int)0x80000000u)));
}
KL_INLINE kl_fv kl_fv_abs(kl_fv v) { return _mm512_abs_ps(v); }
KL_INLINE kl_fv kl_fv_min(kl_fv a, kl_fv b) { return _mm512_min_ps(a, b); }
KL_INLINE kl_fv kl_fv_max(kl_fv a, kl_fv b) { return _mm512_max_ps(a, b); }
KL_INLINE kl_fv kl_fv_round(kl_fv v) { return _mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
KL_INLINE kl_fv kl_fv_exp2i(kl_fv v) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(v), _mm512_set1_epi32(127)), 23));
}
KL_INLINE kl_fv kl_fv_dup_even(kl_fv v) { return _mm512_moveldup_ps(v); }
KL_INLINE kl_fv kl_fv_dup_odd(kl_fv v) { return _mm512_movehdup_ps(v); }
KL_INLINE kl_fvm kl_fv_cmp_lt(kl_fv a, kl_fv b) { return _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ); }
KL_INLINE kl_fvm kl_fv_cmp_le(kl_fv a, kl_fv b) { return _mm512_cmp_ps_mask(a, b, _CMP_LE_OQ); }
KL_INLINE kl_fvm kl_fv_cmp_ge(kl_fv a, kl_fv b) { return _mm512_cmp_ps_mask(a, b, _CMP_GE_OQ); }
KL_INLINE kl_fvm kl_fv_cmp_eq(kl_fv a, kl_fv b) { return _mm512_cmp_ps_mask(a, b, _CMP_EQ_OQ); }
KL_INLINE kl_fvm kl_fv_isnan(kl_fv v) { return _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q); }
KL_INLINE kl_fv kl_fv_blend(kl_fv a, kl_fv b, kl_fvm m) { return _mm512_mask_blend_ps(m, a, b); }
KL_INLINE unsigned kl_fvm_bits(kl_fvm m) { return (unsigned)m; }
KL_INLINE float kl_fv_hmax(kl_fv v) { return _mm512_reduce_max_ps(v); }

/* ---- f64 partials (reductions) ---- */

typedef struct {
    __m512d a, b; /* partials 0-7, 8-15 */
} kl_d16;

KL_INLINE kl_d16 kl_d16_zero(void) { return (kl_d16){_mm512_setzero_pd(), _mm512_setzero_pd()}; }
KL_INLINE kl_d16 kl_d16_add_sq(kl_d16 acc, const int j, kl_fv v) {
    (void)j; /* always 0: one vector is all 16 partials */
    const __m512 s = _mm512_mul_ps(v, v);
    acc.a = _mm512_add_pd(acc.a, _mm512_cvtps_pd(_mm512_castps512_ps256(s)));
    acc.b = _mm512_add_pd(acc.b, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(s), 1))));
    return acc;
}
KL_INLINE double kl_d16_fold(kl_d16 acc) {
    const __m512d t = _mm512_add_pd(acc.a, acc.b);                                          /* + 8 */
    const __m256d h = _mm256_add_pd(_mm512_castpd512_pd256(t), _mm512_extractf64x4_pd(t, 1)); /* + 4 */
    const __m128d q = _mm_add_pd(_mm256_castpd256_pd128(h), _mm256_extractf128_pd(h, 1));   /* + 2 */
    return _mm_cvtsd_f64(q) + _mm_cvtsd_f64(_mm_unpackhi_pd(q, q));
}

/* ---- int8 (quantized activations) ---- */

KL_INLINE kl_fv kl_fv_cvt_i8(const int8_t *p) { return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)p))); }
KL_INLINE void kl_fv_store_i8x32(int8_t *p, const kl_fv *v, int32_t *s) {
    for (int k = 0; k < 2; k++) {
        const __m512i i = _mm512_cvt_roundps_epi32(v[k], _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        _mm_storeu_si128((__m128i *)(p + 16 * k), _mm512_cvtsepi32_epi8(i));
        if (s) s[k] = _mm512_reduce_add_epi32(i);
    }
}

/* ---- f16 conversion ---- */

KL_INLINE kl_fv kl_fv_load_f16(const uint16_t *p) { return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p)); }
KL_INLINE void kl_fv_store_f16(uint16_t *p, kl_fv v) {
    _mm256_storeu_si256((__m256i *)p, _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}
KL_INLINE kl_fv kl_fv_f16_lut(const uint16_t *t, kl_fv v, const int clamp, const int neg) {
    const __m512i h = _mm512_cvtepu16_epi32(_mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    const __m512i mag = _mm512_min_epu32(_mm512_and_si512(h, _mm512_set1_epi32(0x7FFF)), _mm512_set1_epi32(clamp));
    const __mmask16 sgn = _mm512_test_epi32_mask(h, _mm512_set1_epi32(0x8000));
    const __m512i idx = _mm512_mask_add_epi32(mag, sgn, mag, _mm512_set1_epi32(neg));
    return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_i32gather_epi32(idx, (const void *)t, 2)));
}
/* ---- K-quant blocks ----
 * A half block is 2 zmm of unsigned codes (zmm g holds chunks 2g and 2g + 1 of the half, one per 256-bit
 * half; q3_K: plus 2 zmm of 4 where the third bit is clear, subtracted after vpmaddubsw), and per zmm
 * its 32 int16 scales (one per 16-value quarter, 8 lanes each). The dot is vpmaddubsw (pairs <= 2 * 63 *
 * 128, no saturation) then vpmaddwd by the scales (with VNNI one vpdpwssd, the same exact int32 sums):
 * int32 lane k of a kl_kqi (one zmm) holds contract lane k % 8 of the even (k < 8) or odd (k >= 8)
 * chunks, and the contract lanes are the sums of the two 256-bit halves. */

typedef struct {
    __m512i u[2]; /* codes of chunks (0, 1) and (2, 3) of the half */
    __m512i n[2]; /* q3_K: 4 where the code's third bit is clear */
    __m512i s[2]; /* int16 scales of the four 16-value quarters of each zmm */
    __m512i sp;   /* VNNI, kl_kqi_dott: the scales in the lane order of vpackssdw(dot(u[0]), dot(u[1])) */
} kl_kqw;

typedef __m512i kl_kqi;

KL_INLINE kl_kqi kl_kqi_zero(void) { return _mm512_setzero_si512(); }

/* Per 256-bit half a different 16-bit shift count: a in the low half, b in the high half. */
#define KL_KQ_SH2(a, b) _mm512_inserti64x4(_mm512_set1_epi16((short)(a)), _mm256_set1_epi16((short)(b)), 1)

KL_INLINE void kl_kqw_load(kl_kqw *w, const uint8_t *blk, kl_kqs s, const int fmt, const int h) {
    const __m512i m4 = _mm512_set1_epi8(0x0F), m3 = _mm512_set1_epi8(0x03), one = _mm512_set1_epi8(1);
    const __m512i s16 = _mm512_castsi256_si512(_mm256_cvtepi8_epi16(s)); /* the 16 entries as int16 */
    for (int g = 0; g < 2; g++) /* int16 lane k: entry 8h + 4g + k / 8 */
        w->s[g] = _mm512_permutexvar_epi16(
            _mm512_add_epi16(_mm512_set_epi16(3, 3, 3, 3, 3, 3, 3, 3, 2, 2, 2, 2, 2, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0,
                                              0, 0, 0, 0, 0, 0),
                             _mm512_set1_epi16((short)(8 * h + 4 * g))),
            s16);
    /* int16 lane L of vpackssdw(d0, d1): 128-bit segment k = L / 8, i = L % 8; i < 4 from d0 (chunks 0, 1 of
     * the half), i >= 4 from d1 (chunks 2, 3); segments 0-1 hold the first chunk's values, 2-3 the second's:
     * chunk 2 * (i >= 4) + (k >= 2), its 16-value part k % 2 -> entry 8h + 2 * chunk + k % 2 */
    w->sp = _mm512_permutexvar_epi16(
        _mm512_add_epi16(_mm512_set_epi16(7, 7, 7, 7, 3, 3, 3, 3, 6, 6, 6, 6, 2, 2, 2, 2, 5, 5, 5, 5, 1, 1, 1, 1, 4, 4, 4,
                                          4, 0, 0, 0, 0),
                         _mm512_set1_epi16((short)(8 * h))),
        s16);
    if (fmt == KL_KQ_Q2_K || fmt == KL_KQ_Q3_K) {
        const __m512i q = _mm512_broadcast_i64x4(
            _mm256_loadu_si256((const __m256i *)(blk + (fmt == KL_KQ_Q2_K ? 16 : 32) + 32 * h)));
        w->u[0] = _mm512_and_si512(_mm512_srlv_epi16(q, KL_KQ_SH2(0, 2)), m3);
        w->u[1] = _mm512_and_si512(_mm512_srlv_epi16(q, KL_KQ_SH2(4, 6)), m3);
        if (fmt == KL_KQ_Q3_K) {
            const __m512i clear = _mm512_andnot_si512(_mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)blk)),
                                                      _mm512_set1_epi8(-1));
            for (int g = 0; g < 2; g++) {
                const int b = 4 * h + 2 * g;
                w->n[g] = _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi16(clear, KL_KQ_SH2(b, b + 1)), one), 2);
            }
        }
    } else if (fmt == KL_KQ_Q4_K || fmt == KL_KQ_Q5_K) {
        const uint8_t *qs = blk + (fmt == KL_KQ_Q4_K ? 16 : 48) + 64 * h;
        const __m512i qh = fmt == KL_KQ_Q5_K ? _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(blk + 16)))
                                             : _mm512_setzero_si512();
        for (int g = 0; g < 2; g++) {
            const __m512i q = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(qs + 32 * g)));
            w->u[g] = _mm512_and_si512(_mm512_srlv_epi16(q, KL_KQ_SH2(0, 4)), m4);
            if (fmt == KL_KQ_Q5_K) {
                const int b = 4 * h + 2 * g;
                const __m512i hb = _mm512_and_si512(_mm512_srlv_epi16(qh, KL_KQ_SH2(b, b + 1)), one);
                w->u[g] = _mm512_or_si512(w->u[g], _mm512_slli_epi16(hb, 4));
            }
        }
    } else { /* q6_K: ql's 64 bytes hold chunks (0, 1) low nibbles and (2, 3) high nibbles */
        const __m512i ql = _mm512_loadu_si512((const void *)(blk + 64 * h));
        const __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(blk + 128 + 32 * h)));
        w->u[0] = _mm512_or_si512(_mm512_and_si512(ql, m4),
                                  _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi16(qh, KL_KQ_SH2(0, 2)), m3), 4));
        w->u[1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), m4),
                                  _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi16(qh, KL_KQ_SH2(4, 6)), m3), 4));
    }
}

KL_INLINE kl_kqi kl_kqi_seed(kl_kqs s, const km_block_q8_k *x, const int fmt) {
    return fmt == KL_KQ_Q6_K ? _mm512_zextsi256_si512(kl_x86_kq_seed8(s, x)) : _mm512_setzero_si512();
}

KL_INLINE kl_kqi kl_kqi_dot(kl_kqi acc, const kl_kqw *w, const int8_t *xq, const int fmt) {
    for (int g = 0; g < 2; g++) {
        const __m512i x = _mm512_loadu_si512((const void *)(xq + 64 * g));
        __m512i p = _mm512_maddubs_epi16(w->u[g], x);
        if (fmt == KL_KQ_Q3_K) p = _mm512_sub_epi16(p, _mm512_maddubs_epi16(w->n[g], x));
#if defined(__AVX512VNNI__)
        acc = _mm512_dpwssd_epi32(acc, p, w->s[g]);
#else
        acc = _mm512_add_epi32(acc, _mm512_madd_epi16(p, w->s[g]));
#endif
    }
    return acc;
}

KL_INLINE void kl_kqw_codes(int8_t *out, const kl_kqw *w, const int fmt) {
    for (int g = 0; g < 2; g++)
        _mm512_storeu_si512((void *)(out + 64 * g), fmt == KL_KQ_Q3_K ? _mm512_sub_epi8(w->u[g], w->n[g]) : w->u[g]);
}

/* With VNNI: vpdpbusd gives each 4-value group's exact sum (|.| <= 4 * 63 * 128 < 2^15), two zmm of them are
 * packed to int16 (no saturation) and multiplied by their scales with one vpmaddwd, which adds two groups
 * of one 16-value quarter into an int32 lane: the total is exact, the lanes are not the contract's. */
KL_INLINE kl_kqi kl_kqi_dott(kl_kqi acc, const kl_kqw *w, const int8_t *xq, const int fmt) {
#if defined(__AVX512VNNI__)
    if (fmt != KL_KQ_Q3_K) {
        const __m512i d0 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w->u[0], _mm512_loadu_si512((const void *)xq));
        const __m512i d1 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w->u[1], _mm512_loadu_si512((const void *)(xq + 64)));
        return _mm512_add_epi32(acc, _mm512_madd_epi16(_mm512_packs_epi32(d0, d1), w->sp));
    }
#endif
    return kl_kqi_dot(acc, w, xq, fmt);
}

KL_INLINE __m256i kl_x86_kqi_fold8(kl_kqi acc) {
    return _mm256_add_epi32(_mm512_castsi512_si256(acc), _mm512_extracti64x4_epi64(acc, 1));
}

KL_INLINE kl_f8 kl_kqi_lanes(kl_kqi acc) { return _mm256_cvtepi32_ps(kl_x86_kqi_fold8(acc)); }

/* A pair's contract lanes interleaved (A0 B0 A1 B1 ...): the low and the high 256-bit halves of a and b
 * gathered into two zmm in pair order by one two-source permute each, then added (exact int32). */
KL_INLINE kl_f8x2 kl_kqi_lanes2(kl_kqi a, kl_kqi b) {
    const __m512i lo = _mm512_permutex2var_epi32(a, KL_AVX512_IL, b);
    const __m512i hi = _mm512_permutex2var_epi32(
        a, _mm512_add_epi32(KL_AVX512_IL, _mm512_set_epi32(8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8)), b);
    return _mm512_cvtepi32_ps(_mm512_add_epi32(lo, hi));
}

KL_INLINE kl_f8x2 kl_f8x2_set2(float a, float b) {
    return _mm512_castpd_ps(_mm512_broadcastsd_pd(_mm_castps_pd(_mm_unpacklo_ps(_mm_set_ss(a), _mm_set_ss(b)))));
}
KL_INLINE kl_f8x2 kl_f8x2_mul(kl_f8x2 a, kl_f8x2 b) { return _mm512_mul_ps(a, b); }

KL_INLINE void kl_kqi_store4(int32_t *p, kl_kqi acc) {
    const __m256i h = kl_x86_kqi_fold8(acc);
    _mm_storeu_si128((__m128i *)p, _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1)));
}

KL_INLINE kl_f8 kl_q32_dot8(const uint8_t *const *rows, int64_t off, const kl_q32xb *p, const int fmt) {
    if (KL_Q32_QH(fmt) >= 0 || fmt == KL_Q32_Q8_0) {
        kl_f8 f[8];
        for (int c = 0; c < 8; c++) f[c] = kl_q32_dot(kl_q32w_load(rows[c] + off, fmt), p, fmt);
        return kl_f8_sum8(f);
    }
    return kl_x86_dot8_nibbles(rows, off + KL_Q32_QS(fmt), p->lo2, p->hi2, p->xsum, KL_Q32_OFF(fmt));
}

/* ---- flash attention (attention/ggmlfa_body.h) ---- */
KL_INLINE kl_fv kl_fv_rt16(kl_fv v) {
    return _mm512_cvtph_ps(_mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

/* 8 lanes of expf's main path in double (the table by two two-source permutes) */
KL_INLINE __m256 kl_avx512_expf8(__m256 x) {
    const __m512d n = _mm512_set1_pd(KL_EXPF_N), shift = _mm512_set1_pd(KL_EXPF_SHIFT);
    const __m512d xd = _mm512_cvtps_pd(x);
    __m512d kd = _mm512_fmadd_pd(n, xd, shift);
    const __m512i ki = _mm512_castpd_si512(kd);
    kd = _mm512_sub_pd(kd, shift);
    const __m512d r = _mm512_fmsub_pd(n, xd, kd);
    const __m512i t01 = _mm512_permutex2var_epi64(_mm512_load_si512(kl_expf_tab), ki, _mm512_load_si512(kl_expf_tab + 8));
    const __m512i t23 = _mm512_permutex2var_epi64(_mm512_load_si512(kl_expf_tab + 16), ki, _mm512_load_si512(kl_expf_tab + 24));
    __m512i t = _mm512_mask_blend_epi64(_mm512_test_epi64_mask(ki, _mm512_set1_epi64(16)), t01, t23);
    t = _mm512_add_epi64(t, _mm512_slli_epi64(ki, 47));
    const __m512d z = _mm512_fmadd_pd(r, _mm512_set1_pd(KL_EXPF_C0), _mm512_set1_pd(KL_EXPF_C1));
    const __m512d r2 = _mm512_mul_pd(r, r);
    __m512d y = _mm512_fmadd_pd(r, _mm512_set1_pd(KL_EXPF_C2), _mm512_set1_pd(1.0));
    y = _mm512_fmadd_pd(z, r2, y);
    y = _mm512_mul_pd(y, _mm512_castsi512_pd(t));
    return _mm512_cvtpd_ps(y);
}

KL_INLINE kl_fv kl_fv_expf(kl_fv x) {
    const __m256 lo = kl_avx512_expf8(_mm512_castps512_ps256(x));
    const __m256 hi = kl_avx512_expf8(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(x), 1)));
    __m512 y = _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castps_pd(_mm512_castps256_ps512(lo)), _mm256_castps_pd(hi), 1));
    const __mmask16 special = _mm512_cmpgt_epu32_mask(_mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(0x7fffffff)),
                                                      _mm512_set1_epi32((int)KL_EXPF_BIG));
    if (__builtin_expect(special != 0, 0)) {
        float xs[16], ys[16];
        _mm512_storeu_ps(xs, x);
        _mm512_storeu_ps(ys, y);
        for (int l = 0; l < 16; l++) {
            if (special >> l & 1) ys[l] = __builtin_expf(xs[l]);
        }
        y = _mm512_loadu_ps(ys);
    }
    return y;
}

/* 16 keys at once: each step one add over lanes of several keys gathered by shuffles (the adds are the
 * contract's, two operands each, so the bits are those of a per-key reduction) */
KL_INLINE void kl_fold16x16(float *s, const float *p) {
    __m512 q1[8], q2[4], q3[2];
    for (int i = 0; i < 8; i++) {
        const __m512 a = _mm512_load_ps(p + 32 * i), b = _mm512_load_ps(p + 32 * i + 16);
        /* lanes 0-7: key 2i's P[l] + P[l+8]; lanes 8-15: key 2i+1's */
        q1[i] = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(1, 0, 1, 0)), _mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(3, 2, 3, 2)));
    }
    for (int i = 0; i < 4; i++) { /* 128-bit block b: key 4i+b's h[l] + h[l+4], l < 4 */
        q2[i] = _mm512_add_ps(_mm512_shuffle_f32x4(q1[2 * i], q1[2 * i + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                              _mm512_shuffle_f32x4(q1[2 * i], q1[2 * i + 1], _MM_SHUFFLE(3, 1, 3, 1)));
    }
    for (int i = 0; i < 2; i++) { /* block b: [u0 + u2, u1 + u3] of key 8i+b, then of key 8i+4+b */
        q3[i] = _mm512_add_ps(_mm512_shuffle_ps(q2[2 * i], q2[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                              _mm512_shuffle_ps(q2[2 * i], q2[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    }
    /* block b: v0 + v1 of keys b, 4+b, 8+b, 12+b */
    const __m512 r = _mm512_add_ps(_mm512_shuffle_ps(q3[0], q3[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                   _mm512_shuffle_ps(q3[0], q3[1], _MM_SHUFFLE(3, 1, 3, 1)));
    _mm512_storeu_ps(s, _mm512_permutexvar_ps(_mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15), r));
}

KL_INLINE kl_fv kl_fv_prefix_max(kl_fv v, float m) {
    const __m512 ninf = _mm512_set1_ps(-__builtin_inff());
    const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    for (int sh = 1; sh < 16; sh <<= 1) { /* inclusive scan: the earlier lane's maximum unless v is greater */
        const __m512 e = _mm512_mask_permutexvar_ps(ninf, (__mmask16)(0xffffu << sh), _mm512_sub_epi32(lane, _mm512_set1_epi32(sh)), v);
        v = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(v, e, _CMP_GT_OQ), e, v);
    }
    const __m512 x = _mm512_mask_permutexvar_ps(ninf, 0xfffe, _mm512_sub_epi32(lane, _mm512_set1_epi32(1)), v);
    const __m512 mm = _mm512_set1_ps(m);
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, mm, _CMP_GT_OQ), mm, x);
}

/* w5-kq additions */

/* Per 256-bit half a different byte: a in the low half, b in the high half. */
#define KL_KQ_B2(a, b) _mm512_inserti64x4(_mm512_set1_epi8((char)(a)), _mm256_set1_epi8((char)(b)), 1)

/* kl_kqw_loadf (km_lanes.h): kl_kqw_load, then the codes of q3_K / q5_K / q6_K rebuilt with fewer shifts
 * (the 512-bit shifts and multiplies share one port): q5_K's fifth bit and q3_K's clear third bit become a
 * byte mask (vptestmb / vptestnmb of the half's bit in each 256-bit half) that adds 16 / selects 4; q6_K's
 * two high bits are shifted straight to bits 4-5 (one 16-bit shift; bits that cross into the next byte
 * land outside 0x30) and masked. kl_kqw_load's own codes are dead and dropped by the compiler. */
KL_INLINE void kl_kqw_loadf(kl_kqw *w, const uint8_t *blk, kl_kqs s, const int fmt, const int h) {
    kl_kqw_load(w, blk, s, fmt, h);
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    if (fmt == KL_KQ_Q3_K) {
        const __m512i hm = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)blk));
        for (int g = 0; g < 2; g++) {
            const int b = 4 * h + 2 * g;
            w->n[g] = _mm512_maskz_mov_epi8(_mm512_testn_epi8_mask(hm, KL_KQ_B2(1 << b, 1 << (b + 1))), _mm512_set1_epi8(4));
        }
    } else if (fmt == KL_KQ_Q5_K) {
        const uint8_t *qs = blk + 48 + 64 * h;
        const __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(blk + 16)));
        for (int g = 0; g < 2; g++) {
            const int b = 4 * h + 2 * g;
            const __m512i q = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(qs + 32 * g)));
            const __m512i lo = _mm512_and_si512(_mm512_srlv_epi16(q, KL_KQ_SH2(0, 4)), m4);
            w->u[g] = _mm512_mask_add_epi8(lo, _mm512_test_epi8_mask(qh, KL_KQ_B2(1 << b, 1 << (b + 1))), lo,
                                           _mm512_set1_epi8(16));
        }
    } else if (fmt == KL_KQ_Q6_K) {
        const __m512i m30 = _mm512_set1_epi8(0x30);
        const __m512i ql = _mm512_loadu_si512((const void *)(blk + 64 * h));
        const __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(blk + 128 + 32 * h)));
        w->u[0] = _mm512_or_si512(_mm512_and_si512(ql, m4), _mm512_and_si512(_mm512_sllv_epi16(qh, KL_KQ_SH2(4, 2)), m30));
        w->u[1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), m4),
                                  _mm512_and_si512(_mm512_srlv_epi16(qh, KL_KQ_SH2(0, 2)), m30));
    }
}

/* w5-forks-lin additions */

/* 16-lane contract vectors: one zmm. */
typedef __m512 kl_f16v;

KL_INLINE kl_f16v kl_f16v_zero(void) { return _mm512_setzero_ps(); }
KL_INLINE kl_f16v kl_f16v_set1(float s) { return _mm512_set1_ps(s); }
KL_INLINE kl_f16v kl_f16v_loadu(const float *p) { return _mm512_loadu_ps(p); }
KL_INLINE kl_f16v kl_f16v_loadn(const float *p, int n) { return _mm512_maskz_loadu_ps(kl_avx512_first(n), p); }
KL_INLINE kl_f16v kl_f16v_mul(kl_f16v a, kl_f16v b) { return _mm512_mul_ps(a, b); }
KL_INLINE kl_f16v kl_f16v_fma(kl_f16v a, kl_f16v b, kl_f16v c) { return _mm512_fmadd_ps(a, b, c); }
KL_INLINE kl_f16v kl_f16v_cvt_i8(const int8_t *p) {
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)p)));
}
KL_INLINE float kl_f16v_fold(kl_f16v v) {
    return kl_f8_fold(_mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1)));
}
KL_INLINE kl_f16v kl_f16v_add(kl_f16v a, kl_f16v b) { return _mm512_add_ps(a, b); }
KL_INLINE kl_f16v kl_f16v_load_f16(const uint16_t *p) { return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p)); }
KL_INLINE kl_f16v kl_f16v_load_bf16(const uint16_t *p) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)p)), 16));
}
/* x with subnormal lanes replaced by zero of the same sign (DAZ on inputs, FTZ on results: |x| < 2^-126). */
KL_INLINE __m512 kl_avx512_flush(__m512 x) {
    const __mmask16 tiny = _mm512_cmp_ps_mask(_mm512_abs_ps(x), _mm512_set1_ps(1.17549435e-38f), _CMP_LT_OQ);
    return _mm512_mask_blend_ps(tiny, x, _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(x),
                                                                               _mm512_set1_epi32((int)0x80000000u))));
}
KL_INLINE kl_f16v kl_f16v_dpbf16(kl_f16v acc, const uint16_t *w, const uint16_t *x) {
    const __m512i wv = _mm512_loadu_si512(w), xv = _mm512_loadu_si512(x);
#if defined(__AVX512BF16__)
    return _mm512_dpbf16_ps(acc, (__m512bh)wv, (__m512bh)xv);
#else
    const __m512i hi = _mm512_set1_epi32((int)0xFFFF0000u);
    const __m512 wo = kl_avx512_flush(_mm512_castsi512_ps(_mm512_and_si512(wv, hi)));
    const __m512 xo = kl_avx512_flush(_mm512_castsi512_ps(_mm512_and_si512(xv, hi)));
    const __m512 we = kl_avx512_flush(_mm512_castsi512_ps(_mm512_slli_epi32(wv, 16)));
    const __m512 xe = kl_avx512_flush(_mm512_castsi512_ps(_mm512_slli_epi32(xv, 16)));
    const __m512 t = kl_avx512_flush(_mm512_fmadd_ps(wo, xo, kl_avx512_flush(acc)));
    return kl_avx512_flush(_mm512_fmadd_ps(we, xe, t));
#endif
}

/* Row pairs (lanes A0 B0 A1 B1 ...): lane 2c / 2c + 1 = the sum of the A / B lanes of v[c] (wrapping int32
 * adds: exact modulo 2^32). 256-bit halves of v[2k] | v[2k+1], then 128-bit chunks (v[4k] .. v[4k+3]),
 * then in-lane pairs; chunk k = (A, B of v[k], A, B of v[4+k]), put in order by one permute. */
KL_INLINE __m512i kl_avx512_sum8x2i(const __m512i v[8]) {
    __m512i u[4], w[2];
    for (int k = 0; k < 4; k++)
        u[k] = _mm512_add_epi32(_mm512_shuffle_i32x4(v[2 * k], v[2 * k + 1], 0x44), _mm512_shuffle_i32x4(v[2 * k], v[2 * k + 1], 0xEE));
    for (int k = 0; k < 2; k++)
        w[k] = _mm512_add_epi32(_mm512_shuffle_i32x4(u[2 * k], u[2 * k + 1], 0x88), _mm512_shuffle_i32x4(u[2 * k], u[2 * k + 1], 0xDD));
    const __m512 a = _mm512_castsi512_ps(w[0]), b = _mm512_castsi512_ps(w[1]);
    const __m512i s = _mm512_add_epi32(_mm512_castps_si512(_mm512_shuffle_ps(a, b, 0x44)), _mm512_castps_si512(_mm512_shuffle_ps(a, b, 0xEE)));
    return _mm512_permutexvar_epi32(_mm512_set_epi32(15, 14, 11, 10, 7, 6, 3, 2, 13, 12, 9, 8, 5, 4, 1, 0), s);
}

/* Row pairs, 32-element blocks: lane c (c < n) of A / B = (float) the exact int32 sum of the 32 products of
 * w[c]'s row A / B against p[c] (kl_q32_dot2's products, all of a block); lanes >= n = +0. The lanes of four
 * products are summed in int32 (with VNNI, and for nibble formats, each carrying a 0x4B400000 seed; eight
 * seeds are removed after the sum) and converted once. */
KL_INLINE kl_f8x2 kl_q32_isum8x2(const kl_q32w2 w[8], const kl_q32xb *p, const int fmt, const int n) {
    const int seeded = KL_VNNI || fmt != KL_Q32_Q8_0;
    __m512i v[8];
    for (int j = 0; j < 8; j++) {
        if (j >= n) {
            v[j] = seeded ? _mm512_set1_epi32(KL_MAGIC_I) : _mm512_setzero_si512();
            continue;
        }
#if defined(__AVX512VNNI__)
        v[j] = _mm512_dpbusd_epi32(w[j].aux, p[j].q2, w[j].w);
#else
        const __m512i one = _mm512_set1_epi16(1);
        if (fmt == KL_Q32_Q8_0) {
            const __m512i xs = _mm512_mask_sub_epi8(p[j].q2, w[j].neg, _mm512_setzero_si512(), p[j].q2);
            v[j] = _mm512_madd_epi16(_mm512_maddubs_epi16(w[j].aux, xs), one);
        } else {
            v[j] = _mm512_add_epi32(_mm512_madd_epi16(_mm512_maddubs_epi16(w[j].w, p[j].q2), one), p[j].seed2);
        }
#endif
    }
    __m512i s = kl_avx512_sum8x2i(v);
    if (seeded) s = _mm512_sub_epi32(s, _mm512_set1_epi32((int32_t)(8u * (uint32_t)KL_MAGIC_I)));
    return _mm512_cvtepi32_ps(s);
}

/* w5-forks-attn additions */

/* t = trunc(v), plus sign(v) when |v - t| >= 0.5 (v - t exact) */
KL_INLINE kl_fv kl_fv_round_away(kl_fv v) {
    const __m512 t = _mm512_roundscale_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    const __mmask16 up = _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_sub_ps(v, t)), _mm512_set1_ps(0.5f), _CMP_GE_OQ);
    const __m512 step = _mm512_castsi512_ps(_mm512_or_si512(
        _mm512_and_si512(_mm512_castps_si512(v), _mm512_set1_epi32((int)0x80000000u)),
        _mm512_castps_si512(_mm512_set1_ps(1.0f))));
    return _mm512_mask_add_ps(t, up, t, step);
}

KL_INLINE float kl_fv_fold_halves(kl_fv v) {
    const __m256 h = _mm256_add_ps(_mm512_castps512_ps256(v), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
    const __m128 q = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    const __m128 r = _mm_add_ps(q, _mm_movehl_ps(q, q));
    return _mm_cvtss_f32(_mm_add_ss(r, _mm_shuffle_ps(r, r, 1)));
}

/* w6-gemm additions */

#define KL_IV 1
typedef __m512i kl_iv;
KL_INLINE kl_iv kl_iv_zero(void) { return _mm512_setzero_si512(); }
KL_INLINE kl_iv kl_iv_load(const void *p) { return _mm512_load_si512(p); }
#define KL_IV_LOADU 1
KL_INLINE kl_iv kl_iv_loadu(const void *p) { return _mm512_loadu_si512(p); }
KL_INLINE kl_iv kl_iv_cvt_u8(const uint8_t *p) { return _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)p)); }
KL_INLINE kl_iv kl_iv_cvt_i8w(const int8_t *p) {
    return _mm512_cvtepu16_epi32(_mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)p)));
}
KL_INLINE kl_iv kl_iv_dpw(kl_iv acc, kl_iv a, kl_iv b) {
#if defined(__AVX512VNNI__)
    return _mm512_dpwssd_epi32(acc, a, b);
#else
    return _mm512_add_epi32(acc, _mm512_madd_epi16(a, b));
#endif
}
/* The 3-bit codes: the low pair shifted down (32-bit lanes: the two bits stay in their byte, the mask drops what
 * came from the byte above), hb's bit c alone moved to bit 2 (each byte holds only that bit, so the 32-bit shift
 * keeps it in its byte), one vpternlogd (lo & 3) | hb. */
KL_INLINE kl_iv kl_iv_code3(kl_iv lo, const int s, kl_iv hb, const int c) {
    const __m512i t = s ? _mm512_srli_epi32(lo, (unsigned)s) : lo;
    __m512i h = _mm512_and_si512(hb, _mm512_set1_epi8((char)(1 << c)));
    if (c > 2) h = _mm512_srli_epi32(h, (unsigned)(c - 2));
    else if (c < 2) h = _mm512_slli_epi32(h, (unsigned)(2 - c));
    return _mm512_ternarylogic_epi32(t, h, _mm512_set1_epi8(0x03), 0xEC); /* (t & m) | h */
}
KL_INLINE kl_iv kl_iv_sums4(const int8_t *p) {
#if defined(__AVX512VNNI__)
    return _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(1), _mm512_loadu_si512(p));
#else
    return _mm512_madd_epi16(_mm512_maddubs_epi16(_mm512_set1_epi8(1), _mm512_loadu_si512(p)), _mm512_set1_epi16(1));
#endif
}
KL_INLINE kl_iv kl_iv_neg16(kl_iv v) { return _mm512_sub_epi16(_mm512_setzero_si512(), v); }
KL_INLINE kl_iv kl_iv_cvt_i8p(const int8_t *p) { return _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)p)); }
KL_INLINE kl_iv kl_iv_lo16(kl_iv v) { return _mm512_and_si512(v, _mm512_set1_epi32(0xFFFF)); }
KL_INLINE kl_iv kl_iv_mul16(kl_iv v, const int k) { return _mm512_mullo_epi16(v, _mm512_set1_epi16((short)k)); }
KL_INLINE kl_iv kl_iv_and8(kl_iv v, const int m) { return _mm512_and_si512(v, _mm512_set1_epi8((char)m)); }
KL_INLINE kl_iv kl_iv_srl32(kl_iv v, const int n) { return _mm512_srli_epi32(v, (unsigned)n); }
/* One vpternlogd: (a & 0x0F) | (b & 0xF0) in every byte. */
KL_INLINE kl_iv kl_iv_nib_merge(kl_iv a, kl_iv b) {
    return _mm512_ternarylogic_epi32(a, b, _mm512_set1_epi8(0x0F), 0xE4);
}
KL_INLINE void kl_iv_store(void *p, kl_iv v) { _mm512_store_si512(p, v); }
KL_INLINE kl_iv kl_iv_add(kl_iv a, kl_iv b) { return _mm512_add_epi32(a, b); }
KL_INLINE kl_iv kl_iv_mullo(kl_iv a, kl_iv b) { return _mm512_mullo_epi32(a, b); }
/* The 4 bytes at p in every 32-bit lane. */
KL_INLINE __m512i kl_avx512_bcast32(const void *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return _mm512_set1_epi32(v);
}
KL_INLINE kl_iv kl_iv_dp4(kl_iv acc, kl_iv w, const int8_t *x) {
#if defined(__AVX512VNNI__)
    return _mm512_dpbusd_epi32(acc, w, kl_avx512_bcast32(x));
#else
    return _mm512_add_epi32(acc, _mm512_madd_epi16(_mm512_maddubs_epi16(w, kl_avx512_bcast32(x)), _mm512_set1_epi16(1)));
#endif
}
KL_INLINE kl_iv kl_iv_dp2w(kl_iv acc, kl_iv w, const int16_t *x) {
#if defined(__AVX512VNNI__)
    return _mm512_dpwssd_epi32(acc, w, kl_avx512_bcast32(x));
#else
    return _mm512_add_epi32(acc, _mm512_madd_epi16(w, kl_avx512_bcast32(x)));
#endif
}
#if !defined(__AVX512VNNI__) /* with VNNI the 4-value dot is one vpdpbusd: nothing to save */
#define KL_IV_P16 1
KL_INLINE kl_iv kl_iv_p16(kl_iv acc, kl_iv w, const int8_t *x) {
    return _mm512_add_epi16(acc, _mm512_maddubs_epi16(w, kl_avx512_bcast32(x)));
}
KL_INLINE kl_iv kl_iv_madd16(kl_iv acc, kl_iv a, kl_iv b) { return _mm512_add_epi32(acc, _mm512_madd_epi16(a, b)); }
#endif
KL_INLINE kl_iv kl_iv_gather32(const uint8_t *p, int64_t stride, int n) {
    const __m512i idx = _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                           _mm512_set1_epi32((int32_t)stride));
    return _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), kl_avx512_first(n), idx, (const void *)p, 1);
}
KL_INLINE kl_iv kl_iv_lut16(kl_iv v, const uint8_t *t) {
    return _mm512_shuffle_epi8(_mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)t)), v);
}
KL_INLINE kl_iv kl_iv_nib_lo(kl_iv v) { return _mm512_and_si512(v, _mm512_set1_epi8(0x0F)); }
KL_INLINE kl_iv kl_iv_nib_hi(kl_iv v) { return _mm512_and_si512(_mm512_srli_epi32(v, 4), _mm512_set1_epi8(0x0F)); }
KL_INLINE kl_iv kl_iv_dp4s(kl_iv acc, kl_iv w, const int8_t *x, kl_iv s) {
    const __m512i p = _mm512_maddubs_epi16(w, kl_avx512_bcast32(x));
#if defined(__AVX512VNNI__)
    return _mm512_dpwssd_epi32(acc, p, s);
#else
    return _mm512_add_epi32(acc, _mm512_madd_epi16(p, s));
#endif
}
KL_INLINE kl_iv kl_iv_or(kl_iv a, kl_iv b) { return _mm512_or_si512(a, b); }
KL_INLINE kl_iv kl_iv_srl_and8(kl_iv v, const int n, const int m) {
    return _mm512_and_si512(_mm512_srli_epi32(v, (unsigned)n), _mm512_set1_epi8((char)m));
}
KL_INLINE kl_iv kl_iv_sll32(kl_iv v, const int n) { return _mm512_slli_epi32(v, (unsigned)n); }
KL_INLINE kl_fv kl_fv_cvt_iv(kl_iv v) { return _mm512_cvtepi32_ps(v); }
KL_INLINE kl_fv kl_fv_load(const float *p) { return _mm512_load_ps(p); }
KL_INLINE void kl_fv_store(float *p, kl_fv v) { _mm512_store_ps(p, v); }

/* w6-q32gemm additions */

KL_INLINE kl_iv kl_iv_set1(int32_t s) { return _mm512_set1_epi32(s); }
KL_INLINE kl_iv kl_iv_xor(kl_iv a, kl_iv b) { return _mm512_xor_si512(a, b); }
KL_INLINE kl_iv kl_iv_bitbytes(kl_iv h, int s, uint8_t v) {
    const __m512i lo = _mm512_srl_epi32(h, _mm_cvtsi32_si128(s)); /* bits s.. of each lane at bit 0 */
    const __m512i b0 = _mm512_shuffle_epi8(lo, _mm512_set4_epi32(0x0C0C0C0C, 0x08080808, 0x04040404, 0)); /* byte 0 x 4 */
    const __mmask64 k = _mm512_test_epi8_mask(b0, _mm512_set1_epi32(0x08040201));         /* byte j: bit j */
    return _mm512_maskz_mov_epi8(k, _mm512_set1_epi8((char)v));
}
KL_INLINE kl_fv kl_fv_f16s(const uint8_t *p, int64_t stride, int n) {
    return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(kl_iv_gather32(p, stride, n)));
}
KL_INLINE kl_fv kl_fv_unmagic(kl_iv v) { return _mm512_sub_ps(_mm512_castsi512_ps(v), _mm512_set1_ps(KL_MAGIC_F)); }

/* q32_r8 GEMM additions (km_lanes.h): two q32_r8 groups' tiles unpacked into column lanes (lanes 0-7 = rows 0-7 of
 * the group at p, lanes 8-15 = those of the group gstride bytes on; gstride 0: the first group again). */
#define KL_IV_R8 1
KL_INLINE __m512i kl_avx512_r8_pair(const uint8_t *a, const uint8_t *b) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(const void *)a)),
                              _mm256_loadu_si256((const __m256i *)(const void *)b), 1);
}
KL_INLINE void kl_iv_r8_nib(kl_iv out[8], const uint8_t *p, int64_t gstride) {
    __m512i r[8];
    for (int c = 0; c < 8; c++) r[c] = kl_avx512_r8_pair(p + 32 * c, p + gstride + 32 * c);
    /* the AVX2 header's 8 x 8 dword transpose in each 256-bit half; the last step's 128-bit exchange by qword index */
    const __m512i a0 = _mm512_unpacklo_epi32(r[0], r[1]), a1 = _mm512_unpackhi_epi32(r[0], r[1]);
    const __m512i a2 = _mm512_unpacklo_epi32(r[2], r[3]), a3 = _mm512_unpackhi_epi32(r[2], r[3]);
    const __m512i a4 = _mm512_unpacklo_epi32(r[4], r[5]), a5 = _mm512_unpackhi_epi32(r[4], r[5]);
    const __m512i a6 = _mm512_unpacklo_epi32(r[6], r[7]), a7 = _mm512_unpackhi_epi32(r[6], r[7]);
    const __m512i b0 = _mm512_unpacklo_epi64(a0, a2), b1 = _mm512_unpackhi_epi64(a0, a2);
    const __m512i b2 = _mm512_unpacklo_epi64(a1, a3), b3 = _mm512_unpackhi_epi64(a1, a3);
    const __m512i b4 = _mm512_unpacklo_epi64(a4, a6), b5 = _mm512_unpackhi_epi64(a4, a6);
    const __m512i b6 = _mm512_unpacklo_epi64(a5, a7), b7 = _mm512_unpackhi_epi64(a5, a7);
    const __m512i lo = _mm512_set_epi64(13, 12, 5, 4, 9, 8, 1, 0), hi = _mm512_set_epi64(15, 14, 7, 6, 11, 10, 3, 2);
    out[0] = _mm512_permutex2var_epi64(b0, lo, b4);
    out[4] = _mm512_permutex2var_epi64(b0, hi, b4);
    out[1] = _mm512_permutex2var_epi64(b1, lo, b5);
    out[5] = _mm512_permutex2var_epi64(b1, hi, b5);
    out[2] = _mm512_permutex2var_epi64(b2, lo, b6);
    out[6] = _mm512_permutex2var_epi64(b2, hi, b6);
    out[3] = _mm512_permutex2var_epi64(b3, lo, b7);
    out[7] = _mm512_permutex2var_epi64(b3, hi, b7);
}
KL_INLINE kl_iv kl_iv_r8_bit(const uint8_t *h, int64_t gstride, int l) {
    int32_t a, b; /* lane c: the dword shifted right by c mod 8 puts every byte's bit c mod 8 on its bit 0 */
    memcpy(&a, h + 4 * l, 4);
    memcpy(&b, h + gstride + 4 * l, 4);
    const __m512i v = _mm512_inserti64x4(_mm512_set1_epi32(a), _mm256_set1_epi32(b), 1);
    const __m512i s = _mm512_srlv_epi32(v, _mm512_set_epi32(7, 6, 5, 4, 3, 2, 1, 0, 7, 6, 5, 4, 3, 2, 1, 0));
    return _mm512_slli_epi32(_mm512_and_si512(s, _mm512_set1_epi8(1)), 4);
}
KL_INLINE kl_fv kl_fv_r8_f16(const uint8_t *p, int64_t gstride) {
    const __m128i a = _mm_loadu_si128((const __m128i *)(const void *)p);
    const __m128i b = _mm_loadu_si128((const __m128i *)(const void *)(p + gstride));
    return _mm512_cvtph_ps(_mm256_inserti128_si256(_mm256_castsi128_si256(a), b, 1));
}

/* ---- w6-q32gemv additions (decode row pairs; linear/q32_ggml_body.h's kq32_row1p) ---- */
#define KL_Q32P 1

typedef __m512 kl_f8p;   /* rows A and B interleaved as in kl_f8x2: lane 2l = A[l], lane 2l + 1 = B[l] */
typedef __m512i kl_q32p; /* a block of rows A and B: lane 2l = A's bytes of contract lane l, 2l + 1 = B's */

#define KL_AVX512_EVEN _mm512_set_epi32(15, 13, 11, 9, 7, 5, 3, 1, 14, 12, 10, 8, 6, 4, 2, 0)
KL_INLINE kl_f8p kl_f8p_zero(void) { return _mm512_setzero_ps(); }
KL_INLINE kl_f8p kl_f8p_join(kl_f8 a, kl_f8 b) {
    return _mm512_permutex2var_ps(_mm512_castps256_ps512(a), KL_AVX512_IL, _mm512_castps256_ps512(b));
}
KL_INLINE kl_f8 kl_f8p_lo(kl_f8p v) { return _mm512_castps512_ps256(_mm512_permutexvar_ps(KL_AVX512_EVEN, v)); }
KL_INLINE kl_f8 kl_f8p_hi(kl_f8p v) { return _mm512_extractf32x8_ps(_mm512_permutexvar_ps(KL_AVX512_EVEN, v), 1); }
KL_INLINE kl_f8p kl_f8p_fma(kl_f8p a, kl_f8p b, kl_f8p c) { return _mm512_fmadd_ps(a, b, c); }
KL_INLINE kl_f8p kl_f8p_fma_s(kl_f8p a, const float *s, kl_f8p c) { return _mm512_fmadd_ps(a, _mm512_set1_ps(*s), c); }
/* every lane pair = (v[2j], v[2j + 1]) (j < 8) */
KL_INLINE kl_f8p kl_f8p_bcast(kl_f8p v, int j) {
    return _mm512_castpd_ps(_mm512_permutexvar_pd(_mm512_set1_epi64(j), _mm512_castps_pd(v)));
}
/* Four rows' lanes j of two pairs: lanes 4k + i = (v0[2j], v0[2j + 1], v1[2j], v1[2j + 1])[i] (j < 8). */
KL_INLINE kl_f8p kl_f8p_pick4(kl_f8p v0, kl_f8p v1, int j) {
    const __m512i i = _mm512_add_epi32(_mm512_set1_epi32(2 * j), _mm512_set_epi32(17, 16, 1, 0, 17, 16, 1, 0, 17, 16, 1,
                                                                                  0, 17, 16, 1, 0));
    return _mm512_permutex2var_ps(v0, i, v1);
}
/* lanes 4k + i = p[i] (i < 4); kl_f8p_store4: p[i] = lane i */
KL_INLINE kl_f8p kl_f8p_load4(const float *p) { return _mm512_broadcast_f32x4(_mm_loadu_ps(p)); }
KL_INLINE void kl_f8p_store4(float *p, kl_f8p v) { _mm_storeu_ps(p, _mm512_castps512_ps128(v)); }
KL_INLINE float kl_f8p_first_lo(kl_f8p v) { return _mm512_cvtss_f32(v); }
KL_INLINE float kl_f8p_first_hi(kl_f8p v) { return _mm_cvtss_f32(_mm_movehdup_ps(_mm512_castps512_ps128(v))); }

/* The 4 bytes at a + j * stride (lanes 2j, j < n) and b + j * stride (lanes 2j + 1), one gather; other lanes 0. */
KL_INLINE __m512i kl_avx512_gather_p(const uint8_t *a, const uint8_t *b, int64_t stride, int n) {
    const __m512i j = _mm512_set_epi32(7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0);
    const __m512i hi = _mm512_set_epi32(1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0);
    const __m512i idx = _mm512_add_epi32(_mm512_mullo_epi32(j, _mm512_set1_epi32((int32_t)stride)),
                                         _mm512_mullo_epi32(hi, _mm512_set1_epi32((int32_t)(b - a))));
    const __mmask16 m = (__mmask16)((1u << 2 * n) - 1u);
    return _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), m, idx, (const void *)a, 1);
}
/* The f16 at a + j * stride as f32 in lane 2j (j < n), at b + j * stride in lane 2j + 1 (others +0). */
KL_INLINE kl_f8p kl_f8p_f16s(const uint8_t *a, const uint8_t *b, int64_t stride, int n) {
    return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(kl_avx512_gather_p(a, b, stride, n)));
}
/* kl_f8p_f16s at a, b (*d) and at a + 2, b + 2 (*m) from one read. */
KL_INLINE void kl_f8p_f16s2(const uint8_t *a, const uint8_t *b, int64_t stride, int n, kl_f8p *d, kl_f8p *m) {
    const __m512i v = kl_avx512_gather_p(a, b, stride, n);
    *d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(v));
    *m = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(v, 16)));
}
KL_INLINE kl_f8p kl_f8p_mul_f8(kl_f8p a, kl_f8 x) { return kl_f8x2_mul_f8(a, x); }

/* A's and B's blocks with their 4-byte groups interleaved by one two-source dword permute: nibble formats
 * take quant bytes 0-15 for lanes 0-7 (low nibbles, elements 0-15) and again for lanes 8-15 (high nibbles,
 * elements 16-31); the fifth bits follow the same order (pdep spreads each row's 32 bits over its nibbles
 * of the byte mask). With VNNI the formats without fifth bits keep the high nibbles in place (16 * code;
 * kl_q32xb's seedd and kl_q32p_dot's magic scale them back). */
#define KL_0F 0x0F0F0F0F0F0F0F0FLL
#define KL_F0 (long long)0xF0F0F0F0F0F0F0F0ULL
KL_INLINE kl_q32p kl_q32p_load(const uint8_t *a, const uint8_t *b, const int fmt) {
    if (fmt == KL_Q32_Q8_0) {
        const __m512i w = _mm512_permutex2var_epi32(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(a + 2))),
                                                    KL_AVX512_IL,
                                                    _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(b + 2))));
        return KL_VNNI ? _mm512_xor_si512(w, _mm512_set1_epi8((char)0x80)) : w;
    }
    const __m512i il = _mm512_set_epi32(19, 3, 18, 2, 17, 1, 16, 0, 19, 3, 18, 2, 17, 1, 16, 0);
    __m512i z = _mm512_permutex2var_epi32(_mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)(a + KL_Q32_QS(fmt)))),
                                          il,
                                          _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)(b + KL_Q32_QS(fmt)))));
    if (KL_VNNI && KL_Q32_QH(fmt) < 0) /* lanes 8-15: 16 * code */
        return _mm512_and_si512(z, _mm512_set_epi64(KL_F0, KL_F0, KL_F0, KL_F0, KL_0F, KL_0F, KL_0F, KL_0F));
    z = _mm512_and_si512(_mm512_srlv_epi64(z, _mm512_set_epi64(4, 4, 4, 4, 0, 0, 0, 0)), _mm512_set1_epi8(0x0F));
    if (KL_Q32_QH(fmt) >= 0) {
        uint32_t ha, hb;
        memcpy(&ha, a + KL_Q32_QH(fmt), 4);
        memcpy(&hb, b + KL_Q32_QH(fmt), 4);
        const uint64_t m = _pdep_u64(ha, (uint64_t)KL_0F) | _pdep_u64(hb, (uint64_t)KL_F0);
        z = _mm512_mask_add_epi8(z, _cvtu64_mask64(m), z, _mm512_set1_epi8(16));
    }
    return z;
}

KL_INLINE kl_f8p kl_q32p_dot(kl_q32p w, const kl_q32xb *p, const int fmt) {
    const __m512 magic = _mm512_set1_ps(KL_MAGIC_F);
#if defined(__AVX512VNNI__)
    if (fmt != KL_Q32_Q8_0 && KL_Q32_QH(fmt) < 0) { /* lanes 8-15: 16 * the dot on magic 1.5 * 2^19 (ulp 1/16): exact */
        const __m512 mg = _mm512_set_ps(0x1.8p19f, 0x1.8p19f, 0x1.8p19f, 0x1.8p19f, 0x1.8p19f, 0x1.8p19f, 0x1.8p19f,
                                        0x1.8p19f, KL_MAGIC_F, KL_MAGIC_F, KL_MAGIC_F, KL_MAGIC_F, KL_MAGIC_F, KL_MAGIC_F,
                                        KL_MAGIC_F, KL_MAGIC_F);
        return _mm512_sub_ps(_mm512_castsi512_ps(_mm512_dpbusd_epi32(p->seedd, w, p->q2d)), mg);
    }
    return _mm512_sub_ps(_mm512_castsi512_ps(_mm512_dpbusd_epi32(p->seedd, w, p->q2d)), magic);
#else
    const __m512i one = _mm512_set1_epi16(1);
    if (fmt == KL_Q32_Q8_0) {
        const __m512i xs = _mm512_mask_sub_epi8(p->q2d, _mm512_movepi8_mask(w), _mm512_setzero_si512(), p->q2d);
        return _mm512_cvtepi32_ps(_mm512_madd_epi16(_mm512_maddubs_epi16(_mm512_abs_epi8(w), xs), one));
    }
    const __m512i s = _mm512_madd_epi16(_mm512_maddubs_epi16(w, p->q2d), one);
    return _mm512_sub_ps(_mm512_castsi512_ps(_mm512_add_epi32(s, p->seedd)), magic);
#endif
}

/* The 16 columns' whole-block dots of a nibble format without fifth bits (the repacked order's decode, lanes =
 * columns; linear/q32_cols_ggml_body.h): lane c < n (<= 16) = (float) the exact int32 sum of the 32 products
 * (code - off) * x of the block at w + c * wrow + off_qs (columns >= n repeat column n - 1). Column c sits in
 * 128-bit chunk c / 4 of vector c % 4: low nibbles against quants 0-15 and high nibbles against 16-31 add into
 * the chunk's four int32 lanes, two unpack levels fold them into lane c (exact). */
#define KL_Q32C 1
KL_INLINE kl_fv kl_q32c_dot16(const uint8_t *w, int64_t wrow, int n, const kl_q32xb *p, const int fmt) {
    const __m512i xlo = _mm512_broadcast_i32x4(_mm256_castsi256_si128(p->lo2));
    const __m512i xhi = _mm512_broadcast_i32x4(_mm256_castsi256_si128(p->hi2));
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    __m512i s[4];
    for (int i = 0; i < 4; i++) {
        const uint8_t *r[4];
        for (int k = 0; k < 4; k++) r[k] = w + (4 * k + i < n ? 4 * k + i : n - 1) * wrow + KL_Q32_QS(fmt);
        __m512i z = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)r[0]));
        z = _mm512_mask_broadcast_i32x4(z, (__mmask16)0x00F0, _mm_loadu_si128((const __m128i *)r[1]));
        z = _mm512_mask_broadcast_i32x4(z, (__mmask16)0x0F00, _mm_loadu_si128((const __m128i *)r[2]));
        z = _mm512_mask_broadcast_i32x4(z, (__mmask16)0xF000, _mm_loadu_si128((const __m128i *)r[3]));
        const __m512i lo = _mm512_and_si512(z, m4), hi = _mm512_and_si512(_mm512_srli_epi16(z, 4), m4);
#if defined(__AVX512VNNI__)
        s[i] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), lo, xlo), hi, xhi);
#else
        s[i] = _mm512_madd_epi16(_mm512_add_epi16(_mm512_maddubs_epi16(lo, xlo), _mm512_maddubs_epi16(hi, xhi)),
                                 _mm512_set1_epi16(1));
#endif
    }
    const __m512i s01 = _mm512_add_epi32(_mm512_unpacklo_epi32(s[0], s[1]), _mm512_unpackhi_epi32(s[0], s[1]));
    const __m512i s23 = _mm512_add_epi32(_mm512_unpacklo_epi32(s[2], s[3]), _mm512_unpackhi_epi32(s[2], s[3]));
    __m512i t = _mm512_add_epi32(_mm512_unpacklo_epi64(s01, s23), _mm512_unpackhi_epi64(s01, s23));
    if (KL_Q32_OFF(fmt)) t = _mm512_sub_epi32(t, _mm512_set1_epi32(KL_Q32_OFF(fmt) * p->xsum));
    return _mm512_cvtepi32_ps(t);
}


/* ---- s8-kq additions: the repacked K-quants' decode (M = 1; linear/q_k_repack_ggml_body.h's kqr_row1) ----
 * q2_K / q4_K only. A block's codes are unpacked from full 64-byte loads (q4_K: low and high nibbles of
 * qs[0..63] and qs[64..127]; q2_K: the four 2-bit fields of qs[0..63]), so each 256-bit half of a code zmm
 * holds a different sub-block; the activation block is re-laid once per block (kl_kq1x_load, shared by the
 * 8 columns) into the same order. Per code zmm one integer dot: with VNNI vpdpbusd (each 4-value group's
 * exact sum, |.| <= 4 * 15 * 128 < 2^15), two zmm of them packed to int16 (no saturation) and multiplied
 * by their scales with one vpmaddwd / vpdpwssd; without VNNI vpmaddubsw (pairs, |.| <= 2 * 15 * 128) and
 * vpmaddwd by the scales. The scales are picked into int16 lanes by vpshufb from the broadcast scale bytes
 * (index 0x80 gives the zero high byte). All int32 adds are exact, so the column's 16 lanes sum to the
 * block's isum in any order. */
#define KL_KQ1 1

typedef __m512i kl_kq1i; /* 16 int32 lanes whose sum is one column's isum of one block */
typedef struct {
    __m512i v[4];
} kl_kq1x;

/* The activation block in kl_kq1_isum's code order: q4_K v[2p] = values [128p + 0..31 | 128p + 64..95] (the
 * low nibbles of qs[64p..64p + 63]), v[2p + 1] = [128p + 32..63 | 128p + 96..127] (their high nibbles); q2_K
 * v[z] = values [32z + 0..31 | 128 + 32z + 0..31] (bits 2z, 2z + 1 of qs[0..63]). */
KL_INLINE void kl_kq1x_load(kl_kq1x *o, const km_block_q8_k *xb, const int fmt) {
    __m512i x[4];
    for (int i = 0; i < 4; i++) x[i] = _mm512_loadu_si512((const void *)(xb->qs + 64 * i));
    for (int p = 0; p < 2; p++) {
        const __m512i a = fmt == KL_KQ_Q2_K ? x[p] : x[2 * p], b = fmt == KL_KQ_Q2_K ? x[p + 2] : x[2 * p + 1];
        o->v[2 * p] = _mm512_shuffle_i64x2(a, b, _MM_SHUFFLE(1, 0, 1, 0));
        o->v[2 * p + 1] = _mm512_shuffle_i64x2(a, b, _MM_SHUFFLE(3, 2, 3, 2));
    }
}

/* int16 lane L (128-bit segment k = L / 8, i = L % 8) picks scale byte (a + b * (i >= 4) + c * (k & 1) +
 * d * (k >> 1)), high byte zero: the vpshufb control. */
#define KL_KQ1_SEL(a, b, c, d)                                                                                        \
    _mm512_set_epi64(KL_KQ1_Q((a) + (d) + (c) + (b)), KL_KQ1_Q((a) + (d) + (c)), KL_KQ1_Q((a) + (d) + (b)),               \
                     KL_KQ1_Q((a) + (d)), KL_KQ1_Q((a) + (c) + (b)), KL_KQ1_Q((a) + (c)), KL_KQ1_Q((a) + (b)), KL_KQ1_Q(a))
#define KL_KQ1_Q(s) ((long long)(0x8000800080008000ULL | (unsigned long long)(s) * 0x0001000100010001ULL))

/* km_q4k_scales64 (the same bytes) as one 64-bit stream: the low 32 bits carry the scales' parts, the high
 * 32 the mins' (r = the 12 packed bytes), so no two operations are alike and the compiler keeps it in
 * general registers (its SLP vectorizer turns the two-word form into xmm operations on the vector ports). */
KL_INLINE void kl_avx512_q4k_scmn64(const uint8_t *r, uint64_t *sc, uint64_t *mn) {
    uint64_t a;
    uint32_t b;
    memcpy(&a, r, 8);     /* r[0..3] | r[4..7] << 32 */
    memcpy(&b, r + 8, 4); /* r[8..11] */
    const uint64_t lo = a & 0x3F3F3F3F3F3F3F3FULL; /* sc[0..3] | mn[0..3] << 32 */
    const uint64_t hi = ((b | ((uint64_t)b << 28)) & 0x0F0F0F0F0F0F0F0FULL) | ((a >> 2) & 0x3030303030303030ULL);
    *sc = (lo & 0xFFFFFFFFULL) | hi << 32;              /* hi's low half: sc[4..7] */
    *mn = (lo >> 32) | (hi & 0xFFFFFFFF00000000ULL);      /* hi's high half: mn[4..7] */
}

/* 16 int32 lanes summing to the block's isum = sum_e sc(e) * q(e) * x(e) (exact); 16 bytes for
 * kl_f8_kq1_imin8 are written to hs: q2_K its scale bytes, q4_K its 8 scales then its 8 mins (unpacked). */
KL_INLINE kl_kq1i kl_kq1_isum(const uint8_t *blk, const kl_kq1x *x, const int fmt, uint8_t *hs) {
    __m512i u[4], sb;
    if (fmt == KL_KQ_Q2_K) {
        const __m128i hb = _mm_loadu_si128((const __m128i *)blk);
        _mm_storeu_si128((__m128i *)hs, hb);
        const __m512i m3 = _mm512_set1_epi8(0x03);
        const __m512i q = _mm512_loadu_si512((const void *)(blk + 16));
        u[0] = _mm512_and_si512(q, m3);
        u[1] = _mm512_and_si512(_mm512_srli_epi16(q, 2), m3);
        u[2] = _mm512_and_si512(_mm512_srli_epi16(q, 4), m3);
        u[3] = _mm512_and_si512(_mm512_srli_epi16(q, 6), m3);
        sb = _mm512_and_si512(_mm512_broadcast_i32x4(hb), _mm512_set1_epi8(0x0F));
    } else {
        const __m512i m4 = _mm512_set1_epi8(0x0F);
        for (int p = 0; p < 2; p++) {
            const __m512i q = _mm512_loadu_si512((const void *)(blk + 16 + 64 * p));
            u[2 * p] = _mm512_and_si512(q, m4);
            u[2 * p + 1] = _mm512_and_si512(_mm512_srli_epi16(q, 4), m4);
        }
        uint64_t sc, mn;
        kl_avx512_q4k_scmn64(blk + 4, &sc, &mn);
        memcpy(hs, &sc, 8);
        memcpy(hs + 8, &mn, 8);
        sb = _mm512_set1_epi64((long long)sc);
    }
#if defined(__AVX512VNNI__)
    /* vpackssdw(d[2p], d[2p + 1]) int16 lane (k, i): zmm 2p + (i >= 4), segment k. q4_K: zmm z's half t is
     * sub-block 4 * (z / 2) + 2t + z % 2; q2_K: 8t + 2z + (k & 1). */
    __m512i acc = _mm512_setzero_si512();
    for (int p = 0; p < 2; p++) {
        const __m512i d0 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u[2 * p], x->v[2 * p]);
        const __m512i d1 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u[2 * p + 1], x->v[2 * p + 1]);
        const __m512i sel = fmt == KL_KQ_Q2_K ? KL_KQ1_SEL(4 * p, 2, 1, 8) : KL_KQ1_SEL(4 * p, 1, 0, 2);
        acc = _mm512_dpwssd_epi32(acc, _mm512_packs_epi32(d0, d1), _mm512_shuffle_epi8(sb, sel));
    }
    return acc;
#else
    /* vpmaddubsw(u[z], x) segment k is one sub-block: q4_K 4 * (z / 2) + 2 * (k >> 1) + z % 2; q2_K
     * 8 * (k >> 1) + 2z + (k & 1). */
    __m512i acc = _mm512_setzero_si512();
    for (int z = 0; z < 4; z++) {
        const __m512i sel = fmt == KL_KQ_Q2_K ? KL_KQ1_SEL(2 * z, 0, 1, 8) : KL_KQ1_SEL(4 * (z / 2) + z % 2, 0, 0, 2);
        acc = _mm512_add_epi32(acc, _mm512_madd_epi16(_mm512_maddubs_epi16(u[z], x->v[z]), _mm512_shuffle_epi8(sb, sel)));
    }
    return acc;
#endif
}

/* Lane j = the sum of the four int32 of 128-bit segment j % 4 of b[j / 4] (exact), as f32. */
KL_INLINE kl_f8 kl_avx512_fold4x8(__m512i b0, __m512i b1) {
    __m512i v = _mm512_add_epi32(_mm512_unpacklo_epi64(b0, b1), _mm512_unpackhi_epi64(b0, b1));
    v = _mm512_add_epi32(v, _mm512_shuffle_epi32(v, _MM_PERM_CDAB));
    const __m512i r = _mm512_permutexvar_epi32(_mm512_setr_epi32(0, 4, 8, 12, 2, 6, 10, 14, 0, 0, 0, 0, 0, 0, 0, 0), v);
    return _mm256_cvtepi32_ps(_mm512_castsi512_si256(r));
}

/* Lane j = the sum of t[j]'s 16 int32 lanes (exact), as f32: halves, then quarters, then the last four. */
KL_INLINE kl_f8 kl_f8_kq1_sum8(const kl_kq1i *t) {
    __m512i a[4], b[2];
    for (int p = 0; p < 4; p++) /* segments: column 2p's two half-sums, then column 2p + 1's */
        a[p] = _mm512_add_epi32(_mm512_shuffle_i64x2(t[2 * p], t[2 * p + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                                _mm512_shuffle_i64x2(t[2 * p], t[2 * p + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    for (int q = 0; q < 2; q++) /* segment c: column 4q + c's four lanes */
        b[q] = _mm512_add_epi32(_mm512_shuffle_i64x2(a[2 * q], a[2 * q + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                                _mm512_shuffle_i64x2(a[2 * q], a[2 * q + 1], _MM_SHUFFLE(3, 1, 3, 1)));
    return kl_avx512_fold4x8(b[0], b[1]);
}

/* Lane j = column j's imin (exact int32, as f32) from its 16 bytes at hs + 16 j (written by kl_kq1_isum):
 * q2_K the 16 mins (high nibbles) as int16 times the 16 bsums, two columns per zmm; q4_K the 8 mins as int16
 * (one column per 128-bit segment) times the bsums' pair sums (|.| <= 32 * 127), then the int32 folds. */
KL_INLINE kl_f8 kl_f8_kq1_imin8(const uint8_t *hs, const km_block_q8_k *xb, const int fmt) {
    if (fmt == KL_KQ_Q2_K) {
        const __m512i bs = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)xb->bsums));
        __m512i a[4], b[2];
        for (int p = 0; p < 4; p++) /* halves: column 2p's eight int32, then column 2p + 1's */
            a[p] = _mm512_madd_epi16(_mm512_srli_epi16(_mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)(hs + 32 * p))), 4), bs);
        for (int q = 0; q < 2; q++)
            b[q] = _mm512_add_epi32(_mm512_shuffle_i64x2(a[2 * q], a[2 * q + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                                    _mm512_shuffle_i64x2(a[2 * q], a[2 * q + 1], _MM_SHUFFLE(3, 1, 3, 1)));
        return kl_avx512_fold4x8(b[0], b[1]);
    }
    const __m128i ps = _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)xb->bsums), _mm_loadu_si128((const __m128i *)(xb->bsums + 8)));
    const __m512i psb = _mm512_broadcast_i32x4(ps);
    const __m512i sel = _mm512_set4_epi32((int)0x800F800E, (int)0x800D800C, (int)0x800B800A, (int)0x80098008);
    __m512i b[2];
    for (int q = 0; q < 2; q++) {
        const __m512i mn = _mm512_shuffle_epi8(_mm512_loadu_si512((const void *)(hs + 64 * q)), sel);
        b[q] = _mm512_madd_epi16(mn, psb);
    }
    return kl_avx512_fold4x8(b[0], b[1]);
}

/* Lanes j of lo and hi: the f16 at p[j]'s low and high 16 bits, as f32. */
KL_INLINE void kl_f8_kq1_f16pair(const uint32_t *p, kl_f8 *lo, kl_f8 *hi) {
    const __m256i v = _mm256_loadu_si256((const __m256i *)p);
    *lo = _mm256_cvtph_ps(_mm256_cvtepi32_epi16(v));
    *hi = _mm256_cvtph_ps(_mm256_cvtepi32_epi16(_mm256_srli_epi32(v, 16)));
}


/* ---- s8-kq additions: q3_K's decode dot (linear/q_k_vecdot_ggml_body.h's kqv_row1_q3) ----
 * The code q = u - 4 [third bit clear] (u the two low bits) is dotted as the unsigned u + 4 [bit set] (0..7,
 * set by a vptestmb mask), and the activation's own -4 * x sums (kl_kq3x, once per activation block) supply
 * the -4: with VNNI vpdpbusd accumulates onto -4 * (sum of each 4-value group), so each int32 lane is the
 * exact sum of q * x over its 4-value group (|.| <= 4 * 4 * 128 < 2^15), and vpdpwssd multiplies it by its
 * sub-block's scale (int16 pairs (scale, 0): the lane's high half, its sign, meets 0); without VNNI
 * vpmaddubsw's pairs (<= 2 * 7 * 128) get -4 * (their pair sum) added (int16, exact) before vpmaddwd by the
 * scales. Either way the int32 lane k of a zmm holds the same values as kl_kqi_dot gave it, so kl_kqi's
 * contract lanes are unchanged and each is exact; one vpmaddubsw and one subtraction fewer per 64 values
 * (VNNI: the vpmaddubsw and the subtraction). */
#define KL_KQ3X 1

typedef struct {
    __m512i v[4]; /* v[2h + g]: from the quants xq[128h + 64g .. + 63]: VNNI -4 * their 16 group sums (int32),
                     else -4 * their 32 pair sums (int16) */
} kl_kq3x;

KL_INLINE void kl_kq3x_load(kl_kq3x *o, const km_block_q8_k *xb) {
    for (int i = 0; i < 4; i++) {
        const __m512i x = _mm512_loadu_si512((const void *)(xb->qs + 64 * i));
#if defined(__AVX512VNNI__)
        o->v[i] = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(4), x));
#else
        o->v[i] = _mm512_sub_epi16(_mm512_setzero_si512(), _mm512_maddubs_epi16(_mm512_set1_epi8(4), x));
#endif
    }
}

/* int16 lane L of the vpermw index of kl_kqw_load_q3x's VNNI scales: even L scale entry e + L / 8 (the int32
 * lane L / 2 holds values 2L .. 2L + 3 of the 64, a 16-value sub-block per 8 int16 lanes), odd L entry 16 (0) */
#define KL_KQ3_SI(e)                                                                                                   \
    _mm512_set_epi16(16, (e) + 3, 16, (e) + 3, 16, (e) + 3, 16, (e) + 3, 16, (e) + 2, 16, (e) + 2, 16, (e) + 2, 16,     \
                     (e) + 2, 16, (e) + 1, 16, (e) + 1, 16, (e) + 1, 16, (e) + 1, 16, (e), 16, (e), 16, (e), 16, (e))

/* q3_K's half h for kl_kqi_dot_q3x: u[g] = the codes + 4 (0..7), s[g] = the scales (VNNI: of the int32
 * lanes as int16 pairs (scale, 0); else kl_kqw_load's). */
KL_INLINE void kl_kqw_load_q3x(kl_kqw *w, const uint8_t *blk, kl_kqs s, const int h) {
    const __m512i m3 = _mm512_set1_epi8(0x03);
    const __m512i q = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(blk + 32 + 32 * h)));
    const __m512i hm = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)blk));
#if defined(__AVX512VNNI__)
    const __m512i s16 = _mm512_zextsi256_si512(_mm256_cvtepi8_epi16(s)); /* int16 lanes 16..31: 0 */
#else
    kl_kqw_load(w, blk, s, KL_KQ_Q3_K, h); /* the scales s[g] (its codes are replaced below) */
#endif
    for (int g = 0; g < 2; g++) {
        const int b = 4 * h + 2 * g;
        const __m512i u = _mm512_and_si512(_mm512_srlv_epi16(q, KL_KQ_SH2(4 * g, 4 * g + 2)), m3);
        w->u[g] = _mm512_mask_add_epi8(u, _mm512_test_epi8_mask(hm, KL_KQ_B2(1 << b, 1 << (b + 1))), u, _mm512_set1_epi8(4));
#if defined(__AVX512VNNI__)
        w->s[g] = _mm512_permutexvar_epi16(KL_KQ3_SI(8 * h + 4 * g), s16);
#endif
    }
}

/* kl_kqi_dot of q3_K's half h (w from kl_kqw_load_q3x) with the activation block's kl_kq3x c: the same
 * contract lanes, each exact. */
KL_INLINE kl_kqi kl_kqi_dot_q3x(kl_kqi acc, const kl_kqw *w, const int8_t *xq, const kl_kq3x *c, const int h) {
    for (int g = 0; g < 2; g++) {
        const __m512i x = _mm512_loadu_si512((const void *)(xq + 64 * g));
#if defined(__AVX512VNNI__)
        acc = _mm512_dpwssd_epi32(acc, _mm512_dpbusd_epi32(c->v[2 * h + g], w->u[g], x), w->s[g]);
#else
        acc = _mm512_add_epi32(acc, _mm512_madd_epi16(_mm512_add_epi16(_mm512_maddubs_epi16(w->u[g], x), c->v[2 * h + g]), w->s[g]));
#endif
    }
    return acc;
}

/* q32_r8 row pairs (km_lanes.h, linear/q32_r8_body.h): rows r and r + 1 of a q32_r8 tile as one zmm (each row's 32
 * nibble bytes, adjacent in the layout: the low 256 bits row r's, the high row r + 1's), so a tile's 8 rows are four
 * 512-bit passes instead of eight 256-bit ones; every lane's integer dot and f32 chain is the kl_r8 one. */
#define KL_R8P 1
typedef __m512i kl_b64;
typedef __m512 kl_f8r; /* lanes 0-7: row r's kl_f8, 8-15: row r + 1's */

KL_INLINE kl_b64 kl_b64_load(const void *p) { return _mm512_loadu_si512(p); }
KL_INLINE kl_b64 kl_b64_dup(const void *p) { return _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)p)); }
KL_INLINE kl_b64 kl_r8p_lo(kl_b64 p) { return _mm512_and_si512(p, _mm512_set1_epi8(0x0F)); }
KL_INLINE kl_b64 kl_r8p_hi(kl_b64 p) { return _mm512_and_si512(_mm512_srli_epi16(p, 4), _mm512_set1_epi8(0x0F)); }
/* byte i of half q (0: row r, 1: row r + 1) = nib's byte + 16 * bit (r + q) of h's byte (h: a fifth-bit plane in both
 * halves, kl_b64_dup; r even, a compile-time constant) */
KL_INLINE kl_b64 kl_r8p_code(kl_b64 nib, kl_b64 h, const int r) {
    const __m512i bit = _mm512_inserti64x4(_mm512_set1_epi8((char)(1 << r)), _mm256_set1_epi8((char)(1 << (r + 1))), 1);
    return _mm512_mask_add_epi8(nib, _mm512_test_epi8_mask(h, bit), nib, _mm512_set1_epi8(16));
}
KL_INLINE kl_f8r kl_r8p_dot(kl_b64 c, kl_b64 x, kl_b64 seed) {
#ifdef __AVX512VNNI__
    const __m512i s = _mm512_dpbusd_epi32(seed, c, x);
#else
    const __m512i s = _mm512_add_epi32(_mm512_madd_epi16(_mm512_maddubs_epi16(c, x), _mm512_set1_epi16(1)), seed);
#endif
    return _mm512_sub_ps(_mm512_castsi512_ps(s), _mm512_set1_ps(KL_MAGIC_F));
}
KL_INLINE kl_f8r kl_r8p_dot0(kl_b64 c, kl_b64 x) {
#ifdef __AVX512VNNI__
    const __m512i s = _mm512_dpbusd_epi32(_mm512_setzero_si512(), c, x);
#else
    const __m512i s = _mm512_madd_epi16(_mm512_maddubs_epi16(c, x), _mm512_set1_epi16(1));
#endif
    return _mm512_cvtepi32_ps(s);
}
KL_INLINE kl_f8r kl_f8r_zero(void) { return _mm512_setzero_ps(); }
KL_INLINE kl_f8r kl_f8r_fma(kl_f8r a, kl_f8r b, kl_f8r c) { return _mm512_fmadd_ps(a, b, c); }
KL_INLINE kl_f8r kl_f8r_loadu(const float *p) { return _mm512_loadu_ps(p); }
KL_INLINE void kl_f8r_storeu(float *p, kl_f8r v) { _mm512_storeu_ps(p, v); }
/* lanes 0-7 = t[r], lanes 8-15 = t[r + 1] (t: 8 rows' values; r a compile-time constant) */
KL_INLINE kl_f8r kl_f8r_pair(kl_f8 t, const int r) {
    const __m512i idx = _mm512_inserti64x4(_mm512_set1_epi32(r), _mm256_set1_epi32(r + 1), 1);
    return _mm512_permutexvar_ps(idx, _mm512_castps256_ps512(t));
}
KL_INLINE kl_f8 kl_f8r_lo(kl_f8r v) { return _mm512_castps512_ps256(v); }
KL_INLINE kl_f8 kl_f8r_hi(kl_f8r v) { return _mm512_extractf32x8_ps(v, 1); }

#endif /* KM_LANES_AVX512_H */
