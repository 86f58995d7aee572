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
 *     code) against signed x, seeded with 0x4B400000 - off * xs4 (off 128 for q8_0, else the code offset).
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

KL_INLINE kl_f8 kl_q32_dot8(const uint8_t *const *rows, int64_t off, const kl_q32xb *p, const int fmt) {
    if (KL_Q32_QH(fmt) >= 0 || fmt == KL_Q32_Q8_0) {
        kl_f8 f[8];
        for (int c = 0; c < 8; c++) f[c] = kl_q32_dot(kl_q32w_load(rows[c] + off, fmt), p, fmt);
        return kl_f8_sum8(f);
    }
    return kl_x86_dot8_nibbles(rows, off + KL_Q32_QS(fmt), p->lo2, p->hi2, p->xsum, KL_Q32_OFF(fmt));
}

#endif /* KM_LANES_AVX512_H */
