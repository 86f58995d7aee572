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

#endif /* KM_LANES_X86_H */
