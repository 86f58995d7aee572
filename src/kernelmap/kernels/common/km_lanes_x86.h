/* km_lanes_x86.h — the parts of the lanes interface that AVX2 and AVX-512 share: kl_f8 on one ymm,
 * f16 loads, folds, prefetch, and the 32-element unpack helpers (AVX2 instructions only).
 * Included by km_lanes_avx2.h and km_lanes_avx512.h; not a lanes header on its own.
 */
#ifndef KM_LANES_X86_H
#define KM_LANES_X86_H

#include <immintrin.h>

#include "km_lanes.h"

typedef __m256 kl_f8;

KL_INLINE kl_f8 kl_f8_zero(void) { return _mm256_setzero_ps(); }
KL_INLINE kl_f8 kl_f8_set1(float s) { return _mm256_set1_ps(s); }
KL_INLINE kl_f8 kl_f8_loadu(const float *p) { return _mm256_loadu_ps(p); }
KL_INLINE void kl_f8_storeu(float *p, kl_f8 v) { _mm256_storeu_ps(p, v); }
KL_INLINE kl_f8 kl_f8_add(kl_f8 a, kl_f8 b) { return _mm256_add_ps(a, b); }
KL_INLINE kl_f8 kl_f8_sub(kl_f8 a, kl_f8 b) { return _mm256_sub_ps(a, b); }
KL_INLINE kl_f8 kl_f8_mul(kl_f8 a, kl_f8 b) { return _mm256_mul_ps(a, b); }
KL_INLINE kl_f8 kl_f8_fma(kl_f8 a, kl_f8 b, kl_f8 c) { return _mm256_fmadd_ps(a, b, c); }
KL_INLINE kl_f8 kl_f8_bcast(kl_f8 v, int j) { return _mm256_permutevar8x32_ps(v, _mm256_set1_epi32(j)); }

/* n <= 8 halves at p + i * stride, packed in general registers (ALU work that overlaps the dots). */
KL_INLINE kl_f8 kl_f8_f16s(const uint8_t *p, int64_t stride, int n) {
    uint64_t q[2] = {0, 0};
    for (int j = 0; j < n; j++) {
        uint16_t h;
        memcpy(&h, p + j * stride, 2);
        q[j >> 2] |= (uint64_t)h << (16 * (j & 3));
    }
    return _mm256_cvtph_ps(_mm_set_epi64x((long long)q[1], (long long)q[0]));
}

KL_INLINE float kl_f8_fold(kl_f8 v) {
    const __m128 h = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1)); /* v_l + v_{l+4} */
    const __m128 g = _mm_add_ps(h, _mm_movehl_ps(h, h));                                  /* h0+h2, h1+h3 */
    return _mm_cvtss_f32(_mm_add_ss(g, _mm_shuffle_ps(g, g, 1)));
}

KL_INLINE void kl_prefetch_l1(const void *p) { _mm_prefetch((const char *)p, _MM_HINT_T0); }
KL_INLINE void kl_prefetch_l2(const void *p) { _mm_prefetch((const char *)p, _MM_HINT_T1); }

/* 32 int8 from 16 packed nibbles: low nibbles are elements 0..15, high nibbles 16..31. */
KL_INLINE __m256i kl_x86_nibbles32(const uint8_t *qs) {
    const __m128i q = _mm_loadu_si128((const __m128i *)qs);
    return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), _mm256_set1_epi8(0x0F));
}

/* Byte j = 0xFF where bit j of the little-endian 32-bit word at p is set. */
KL_INLINE __m256i kl_x86_bits32(const uint8_t *p) {
    uint32_t bits;
    memcpy(&bits, p, 4);
    const __m256i rep = _mm256_shuffle_epi8(_mm256_set1_epi32((int)bits),
                                            _mm256_set_epi64x(0x0303030303030303LL, 0x0202020202020202LL,
                                                              0x0101010101010101LL, 0x0000000000000000LL));
    const __m256i mask = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
    return _mm256_cmpeq_epi8(_mm256_and_si256(rep, mask), mask);
}

/* q5_0 block -> 32 unsigned codes (nibble | qh bit << 4) in [0, 31]; the weight is the code - 16. */
KL_INLINE __m256i kl_x86_u_q5_0(const uint8_t *blk) {
#if defined(__AVX512BW__) && defined(__AVX512VL__)
    uint32_t bits;
    memcpy(&bits, blk + 2, 4);
    const __m256i lo = kl_x86_nibbles32(blk + 6);
    return _mm256_mask_add_epi8(lo, (__mmask32)bits, lo, _mm256_set1_epi8(16));
#else
    const __m256i hi = _mm256_and_si256(kl_x86_bits32(blk + 2), _mm256_set1_epi8(0x10));
    return _mm256_or_si256(kl_x86_nibbles32(blk + 6), hi);
#endif
}

/* The int dot seed 0x4B400000 - off * xs4, xs4[l] = sum of the 4 quants of lane l (exact). */
KL_INLINE __m256i kl_x86_seed8(__m256i q, const int off) {
    const __m256i magic = _mm256_set1_epi32(KL_MAGIC_I);
    if (off == 0) return magic;
    const __m256i s = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), q), _mm256_set1_epi16(1));
    return _mm256_sub_epi32(magic, _mm256_slli_epi32(s, __builtin_ctz((unsigned)off))); /* off = 2^k */
}

/* ---- int8 (quantized activations) ---- */

/* The 32 weights (code - 16) of a q5_0 block, in element order. */
KL_INLINE void kl_q5_0_i8(int8_t *out, const uint8_t *blk) {
    const __m256i hi = _mm256_andnot_si256(kl_x86_bits32(blk + 2), _mm256_set1_epi8((char)0xF0)); /* -16 where bit 4 is 0 */
    const __m256i w = _mm256_or_si256(kl_x86_nibbles32(blk + 6), hi);
    _mm_storeu_si128((__m128i *)out, _mm256_castsi256_si128(w)); /* two 16-byte stores: each later 8-byte */
    _mm_storeu_si128((__m128i *)(out + 16), _mm256_extracti128_si256(w, 1)); /* load forwards from one */
}
/* ---- K-quant blocks: the parts AVX2 and AVX-512 share ---- */

#include "km_kquant.h"

KL_INLINE float kl_h2f(uint16_t h) { return _cvtsh_ss(h); }

KL_INLINE kl_f8 kl_f8_cvt_i8(const int8_t *p, const int off) {
    const __m256i v = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)p));
    return _mm256_cvtepi32_ps(off ? _mm256_sub_epi32(v, _mm256_set1_epi32(off)) : v);
}

/* The 16-entry scale table as 16 int8 (every format's scales fit: q2_K 0..15, q3_K -32..31, q4_K/q5_K
 * 0..63, q6_K int8). */
typedef __m128i kl_kqs;

KL_INLINE kl_kqs kl_kqs_load(const uint8_t *blk, const int fmt) {
    if (fmt == KL_KQ_Q2_K) return _mm_and_si128(_mm_loadu_si128((const __m128i *)blk), _mm_set1_epi8(0x0F));
    if (fmt == KL_KQ_Q3_K) {
        uint64_t lo, hi;
        km_q3k_scales64(blk + 96, &lo, &hi);
        return _mm_sub_epi8(_mm_set_epi64x((long long)hi, (long long)lo), _mm_set1_epi8(32));
    }
    if (fmt == KL_KQ_Q6_K) return _mm_loadu_si128((const __m128i *)(blk + 192));
    uint64_t sc, mn; /* q4_K, q5_K: eight 6-bit scales, each repeated */
    km_q4k_scales64(blk + 4, &sc, &mn);
    const __m128i v = _mm_cvtsi64_si128((long long)sc);
    return _mm_unpacklo_epi8(v, v);
}

/* q6_K's offset seed as 8 int32: lane l = -32 * (sc[2l] * bs[2l] + sc[2l+1] * bs[2l+1]) (int16 operands
 * |-32 * sc| <= 4096, exact). */
KL_INLINE __m256i kl_x86_kq_seed8(kl_kqs s, const km_block_q8_k *x) {
    const __m256i scn = _mm256_sub_epi16(_mm256_setzero_si256(), _mm256_slli_epi16(_mm256_cvtepi8_epi16(s), 5));
    return _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)x->bsums), scn);
}

/* Lane j = t[j][0] + t[j][1] + t[j][2] + t[j][3] (exact int32), as f32. */
KL_INLINE kl_f8 kl_f8_cvt_sum4(const int32_t t[8][4]) {
    const __m256i ab = _mm256_hadd_epi32(_mm256_loadu_si256((const __m256i *)t[0]), _mm256_loadu_si256((const __m256i *)t[2]));
    const __m256i cd = _mm256_hadd_epi32(_mm256_loadu_si256((const __m256i *)t[4]), _mm256_loadu_si256((const __m256i *)t[6]));
    return _mm256_cvtepi32_ps(
        _mm256_permutevar8x32_epi32(_mm256_hadd_epi32(ab, cd), _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
}

KL_INLINE kl_f8 kl_f8_kq_minlanes(const uint8_t *blk, const km_block_q8_k *x, const int fmt) {
    if (fmt == KL_KQ_Q2_K) {
        const __m128i mn = _mm_and_si128(_mm_srli_epi16(_mm_loadu_si128((const __m128i *)blk), 4), _mm_set1_epi8(0x0F));
        return _mm256_cvtepi32_ps(_mm256_madd_epi16(_mm256_cvtepu8_epi16(mn), _mm256_loadu_si256((const __m256i *)x->bsums)));
    }
    uint64_t sc, mn;
    km_q4k_scales64(blk + 4, &sc, &mn);
    const __m128i ps = _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)x->bsums), _mm_loadu_si128((const __m128i *)(x->bsums + 8)));
    const __m128i p4 = _mm_madd_epi16(_mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)mn)), ps);
    return _mm256_cvtepi32_ps(_mm256_zextsi128_si256(p4));
}

KL_INLINE kl_f8 kl_f8_f16x8(const uint16_t *p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)); }

/* imin of 8 columns (km_lanes.h): vpmaddwd of the int16 mins with the int16 bsums (or their pair sums,
 * |.| <= 32 * 127, exact), then the per-column int32 folds. The mins are widened once per block (q2_K: one
 * ymm per column; q4_K/q5_K: two columns per ymm). */
typedef struct {
    __m256i m[8];
} kl_kqm;

KL_INLINE kl_kqm kl_kqm_load(const uint8_t *mn, const int fmt) {
    kl_kqm r;
    for (int j = 0; j < (fmt == KL_KQ_Q2_K ? 8 : 4); j++)
        r.m[j] = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(mn + 16 * j)));
    return r;
}

KL_INLINE kl_f8 kl_f8_kq_imin(const kl_kqm *m, const km_block_q8_k *x, const int fmt) {
    const __m128i b0 = _mm_loadu_si128((const __m128i *)x->bsums), b1 = _mm_loadu_si128((const __m128i *)(x->bsums + 8));
    __m256i r;
    if (fmt == KL_KQ_Q2_K) {
        const __m256i bs = _mm256_set_m128i(b1, b0);
        __m256i p[8];
        for (int j = 0; j < 8; j++) p[j] = _mm256_madd_epi16(m->m[j], bs);
        /* per 128-bit half: columns 0-3 of h0123, 4-7 of h4567 */
        const __m256i h0123 = _mm256_hadd_epi32(_mm256_hadd_epi32(p[0], p[1]), _mm256_hadd_epi32(p[2], p[3]));
        const __m256i h4567 = _mm256_hadd_epi32(_mm256_hadd_epi32(p[4], p[5]), _mm256_hadd_epi32(p[6], p[7]));
        r = _mm256_add_epi32(_mm256_permute2x128_si256(h0123, h4567, 0x20), _mm256_permute2x128_si256(h0123, h4567, 0x31));
    } else {
        const __m256i bs = _mm256_broadcastsi128_si256(_mm_hadd_epi16(b0, b1));
        const __m256i h01 = _mm256_hadd_epi32(_mm256_madd_epi16(m->m[0], bs), _mm256_madd_epi16(m->m[1], bs));
        const __m256i h23 = _mm256_hadd_epi32(_mm256_madd_epi16(m->m[2], bs), _mm256_madd_epi16(m->m[3], bs));
        r = _mm256_permutevar8x32_epi32(_mm256_hadd_epi32(h01, h23), _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    }
    return _mm256_cvtepi32_ps(r);
}

#endif /* KM_LANES_X86_H */
