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
KL_INLINE void kl_prefetch_nt(const void *p) { _mm_prefetch((const char *)p, _MM_HINT_NTA); }

/* 32 int8 from 16 packed nibbles: low nibbles are elements 0..15, high nibbles 16..31. The 16 bytes are loaded into
 * both halves (vbroadcasti128: a load, no shuffle uop) and the upper half shifted by 4 (vpsrlvq): one vector uop
 * fewer than shifting a copy and inserting it (vinserti128), which shows in the compute-bound AVX2 decode GEMVs. */
KL_INLINE __m256i kl_x86_nibbles32(const uint8_t *qs) {
    const __m256i q = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)qs));
    return _mm256_and_si256(_mm256_srlv_epi64(q, _mm256_set_epi64x(4, 4, 0, 0)), _mm256_set1_epi8(0x0F));
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

/* A nibble-format block (q4_0, q4_1, q5_0, q5_1) -> its 32 unsigned codes (nibble | qh bit << 4). */
KL_INLINE __m256i kl_x86_u_q32(const uint8_t *blk, const int fmt) {
    const __m256i lo = kl_x86_nibbles32(blk + KL_Q32_QS(fmt));
    if (KL_Q32_QH(fmt) < 0) return lo;
#if defined(__AVX512BW__) && defined(__AVX512VL__)
    uint32_t bits;
    memcpy(&bits, blk + KL_Q32_QH(fmt), 4);
    return _mm256_mask_add_epi8(lo, (__mmask32)bits, lo, _mm256_set1_epi8(16));
#else
    const __m256i hi = _mm256_and_si256(kl_x86_bits32(blk + KL_Q32_QH(fmt)), _mm256_set1_epi8(0x10));
    return _mm256_or_si256(lo, hi);
#endif
}

/* The int dot seed 0x4B400000 - off * xs4, xs4[l] = sum of the 4 quants of lane l (exact). */
KL_INLINE __m256i kl_x86_seed8(__m256i q, const int off) {
    const __m256i magic = _mm256_set1_epi32(KL_MAGIC_I);
    if (off == 0) return magic;
    const __m256i s = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), q), _mm256_set1_epi16(1));
    return _mm256_sub_epi32(magic, _mm256_slli_epi32(s, __builtin_ctz((unsigned)off))); /* off = 2^k */
}

/* w6-q32gemm ops shared by the AVX2 and AVX-512 lanes (km_lanes.h documents them). */
KL_INLINE void kl_q32_seeds(int32_t *out, const int8_t *qs, const int off) {
    _mm256_store_si256((__m256i *)out, kl_x86_seed8(_mm256_loadu_si256((const __m256i *)qs), off));
}
KL_INLINE int32_t kl_q32_xsum(const int8_t *qs) {
    const __m256i s = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), _mm256_loadu_si256((const __m256i *)qs)),
                                        _mm256_set1_epi16(1));
    const __m128i h = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
    const __m128i q = _mm_add_epi32(h, _mm_unpackhi_epi64(h, h));
    return _mm_cvtsi128_si32(_mm_add_epi32(q, _mm_shuffle_epi32(q, 1)));
}
KL_INLINE float kl_f32_f16(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return _cvtsh_ss(h);
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

/* kl_q32_dot8's activation layout: quants 0-15 (lo2) and 16-31 (hi2) in both 128-bit halves, and their sum
 * (exact) when the format has a code offset. */
KL_INLINE void kl_x86_prep_dot8(__m256i *lo2, __m256i *hi2, int32_t *xsum, const int8_t *qs, const int fmt) {
    *lo2 = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)qs));
    *hi2 = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(qs + 16)));
    *xsum = 0;
    if (KL_Q32_OFF(fmt)) {
        const __m256i s = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), _mm256_loadu_si256((const __m256i *)qs)),
                                            _mm256_set1_epi16(1));
        const __m128i h = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
        const __m128i g = _mm_add_epi32(h, _mm_unpackhi_epi64(h, h));
        *xsum = _mm_cvtsi128_si32(_mm_add_epi32(g, _mm_shuffle_epi32(g, 1)));
    }
}

/* The whole-block dots of 8 nibble rows without fifth bits (q4_0, q4_1): the 16 quant bytes of two rows per
 * ymm, low nibbles against quants 0-15 and high nibbles against 16-31 (int16 sums <= 4 * 15 * 127, or VNNI
 * int32), per row four int32 partials folded exactly by vphaddd; minus off * xsum; lane c = row c (exact). */
KL_INLINE kl_f8 kl_x86_dot8_nibbles(const uint8_t *const *rows, int64_t off, __m256i lo2, __m256i hi2, int32_t xsum,
                                    const int code_off) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    __m256i s[4];
    for (int j = 0; j < 4; j++) {
        const __m256i v = _mm256_loadu2_m128i((const __m128i *)(rows[2 * j + 1] + off), (const __m128i *)(rows[2 * j] + off));
        const __m256i lo = _mm256_and_si256(v, m4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
        s[j] = _mm256_dpbusd_epi32(_mm256_dpbusd_epi32(_mm256_setzero_si256(), lo, lo2), hi, hi2);
#else
        s[j] = _mm256_madd_epi16(_mm256_add_epi16(_mm256_maddubs_epi16(lo, lo2), _mm256_maddubs_epi16(hi, hi2)),
                                 _mm256_set1_epi16(1));
#endif
    }
    /* s[j] = (row 2j: 4 partials | row 2j+1: 4 partials) -> (rows 0, 2, 4, 6 | rows 1, 3, 5, 7) -> rows 0..7 */
    const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(s[0], s[1]), _mm256_hadd_epi32(s[2], s[3]));
    __m256i t = _mm256_permutevar8x32_epi32(h, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    if (code_off) t = _mm256_sub_epi32(t, _mm256_set1_epi32(code_off * xsum));
    return _mm256_cvtepi32_ps(t);
}

/* Lane c = the sum of the eight lanes of v[c] (exact for integer lanes with partial sums below 2^24). */
KL_INLINE kl_f8 kl_f8_sum8(const kl_f8 v[8]) {
    const __m256 h0123 = _mm256_hadd_ps(_mm256_hadd_ps(v[0], v[1]), _mm256_hadd_ps(v[2], v[3]));
    const __m256 h4567 = _mm256_hadd_ps(_mm256_hadd_ps(v[4], v[5]), _mm256_hadd_ps(v[6], v[7]));
    return _mm256_add_ps(_mm256_permute2f128_ps(h0123, h4567, 0x20), _mm256_permute2f128_ps(h0123, h4567, 0x31));
}

/* Elements 8j .. 8j + 7 of a 32-element block as their integers in f32 (exact). */
KL_INLINE kl_f8 kl_q32_values8(const uint8_t *blk, const int fmt, const int j) {
    if (fmt == KL_Q32_Q8_0) return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(blk + 2 + 8 * j))));
    const __m256i u = kl_x86_u_q32(blk, fmt);
    const __m128i h = j < 2 ? _mm256_castsi256_si128(u) : _mm256_extracti128_si256(u, 1);
    const __m256i v = _mm256_cvtepu8_epi32(j & 1 ? _mm_srli_si128(h, 8) : h);
    return _mm256_cvtepi32_ps(_mm256_sub_epi32(v, _mm256_set1_epi32(KL_Q32_OFF(fmt))));
}

/* ---- float formats ---- */

KL_INLINE kl_f8 kl_f8_load_f16(const uint16_t *p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)); }

KL_INLINE kl_f8 kl_f8_load_bf16(const uint16_t *p) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p)), 16));
}

KL_INLINE void kl_f8_store_f16(uint16_t *p, kl_f8 v) {
    _mm_storeu_si128((__m128i *)p, _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
}

/* bf16 by integer rounding on bit 16 (ggml_compute_fp32_to_bf16); NaN: the top half with the quiet bit. */
KL_INLINE void kl_f8_store_bf16(uint16_t *p, kl_f8 v) {
    const __m256i u = _mm256_castps_si256(v);
    const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    const __m256i r = _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(odd, _mm256_set1_epi32(0x7FFF))), 16);
    const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7FFFFFFF)), _mm256_set1_epi32(0x7F800000));
    const __m256i q = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(64));
    const __m256i h = _mm256_blendv_epi8(r, q, nan);
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(h, h), 0x08); /* lanes 0-3, 4-7 */
    _mm_storeu_si128((__m128i *)p, _mm256_castsi256_si128(packed));
}

/* x with subnormal lanes replaced by zero of the same sign (DAZ on inputs, FTZ on results: |x| < 2^-126). */
KL_INLINE __m256 kl_x86_flush(__m256 x) {
    const __m256 tiny = _mm256_cmp_ps(_mm256_andnot_ps(_mm256_set1_ps(-0.0f), x), _mm256_set1_ps(1.17549435e-38f), _CMP_LT_OQ);
    return _mm256_blendv_ps(x, _mm256_and_ps(x, _mm256_set1_ps(-0.0f)), tiny);
}

KL_INLINE kl_f8 kl_f8_dpbf16(kl_f8 acc, const uint16_t *w, const uint16_t *x) {
    const __m256i wv = _mm256_loadu_si256((const __m256i *)w), xv = _mm256_loadu_si256((const __m256i *)x);
#if defined(__AVX512BF16__) && defined(__AVX512VL__)
    return _mm256_dpbf16_ps(acc, (__m256bh)wv, (__m256bh)xv);
#else
    const __m256i hi = _mm256_set1_epi32((int)0xFFFF0000u);
    const __m256 wo = kl_x86_flush(_mm256_castsi256_ps(_mm256_and_si256(wv, hi)));
    const __m256 xo = kl_x86_flush(_mm256_castsi256_ps(_mm256_and_si256(xv, hi)));
    const __m256 we = kl_x86_flush(_mm256_castsi256_ps(_mm256_slli_epi32(wv, 16)));
    const __m256 xe = kl_x86_flush(_mm256_castsi256_ps(_mm256_slli_epi32(xv, 16)));
    const __m256 t = kl_x86_flush(_mm256_fmadd_ps(wo, xo, kl_x86_flush(acc)));
    return kl_x86_flush(_mm256_fmadd_ps(we, xe, t));
#endif
}

KL_INLINE kl_f8 kl_f8_abs(kl_f8 v) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v); }
KL_INLINE kl_f8 kl_f8_max(kl_f8 a, kl_f8 b) { return _mm256_max_ps(a, b); }

KL_INLINE float kl_f8_hmax(kl_f8 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    return _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
}

KL_INLINE int32_t kl_f8_store_i8(int8_t *p, kl_f8 v) {
    const __m256i i = _mm256_cvtps_epi32(v); /* the default rounding: nearest even */
    const __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(i), _mm256_extracti128_si256(i, 1));
    _mm_storel_epi64((__m128i *)p, _mm_packs_epi16(w, w));
    const __m128i s = _mm_add_epi32(_mm256_castsi256_si128(i), _mm256_extracti128_si256(i, 1));
    const __m128i s2 = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
    return _mm_cvtsi128_si32(_mm_add_epi32(s2, _mm_shuffle_epi32(s2, 1)));
}

/* w5-kq additions */

/* kl_kq_imin1 (km_lanes.h): the int16 mins times the int16 bsums (q4_K/q5_K: their pair sums, |.| <= 32 * 127)
 * by vpmaddwd, then an int32 fold (exact). */
KL_INLINE int32_t kl_kq_imin1(const uint8_t *blk, const km_block_q8_k *x, const int fmt) {
    const __m128i b0 = _mm_loadu_si128((const __m128i *)x->bsums), b1 = _mm_loadu_si128((const __m128i *)(x->bsums + 8));
    __m128i p;
    if (fmt == KL_KQ_Q2_K) {
        const __m128i mn = _mm_and_si128(_mm_srli_epi16(_mm_loadu_si128((const __m128i *)blk), 4), _mm_set1_epi8(0x0F));
        p = _mm_add_epi32(_mm_madd_epi16(_mm_cvtepu8_epi16(mn), b0),
                          _mm_madd_epi16(_mm_cvtepu8_epi16(_mm_unpackhi_epi64(mn, mn)), b1));
    } else {
        uint64_t sc, mn;
        km_q4k_scales64(blk + 4, &sc, &mn);
        p = _mm_madd_epi16(_mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)mn)), _mm_hadd_epi16(b0, b1));
    }
    p = _mm_add_epi32(p, _mm_unpackhi_epi64(p, p));
    return _mm_cvtsi128_si32(_mm_add_epi32(p, _mm_shuffle_epi32(p, 1)));
}

/* w5-forks-lin additions (shared by km_lanes_avx2.h and km_lanes_avx512.h) */

/* Four int32 at p whose sum is sum_{j<8} mn_j * (bsums[2j] + bsums[2j+1]) (mn_j byte j of mn): the pair sums
 * by vphaddw (|.| <= 4096), then vpmaddwd with the widened mins (exact). */
KL_INLINE void kl_kq_imin4(int32_t *p, uint64_t mn, const km_block_q8_k *x) {
    const __m128i ps = _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)x->bsums), _mm_loadu_si128((const __m128i *)(x->bsums + 8)));
    _mm_storeu_si128((__m128i *)p, _mm_madd_epi16(_mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)mn)), ps));
}

/* q32_r8 additions (shared by km_lanes_avx2.h and km_lanes_avx512.h; km_lanes.h documents them): one row's codes of
 * a tile of the repacked layout "q32_r8" and their exact dots, and the 8 rows' whole-block sums of a tile
 * (linear/q32_r8_body.h). */
#define KL_R8 1
typedef __m256i kl_b32;

KL_INLINE kl_b32 kl_b32_load(const void *p) { return _mm256_loadu_si256((const __m256i *)p); }
KL_INLINE kl_f8 kl_f8_bcast_mem(const float *p) { return _mm256_broadcast_ss(p); }
KL_INLINE kl_b32 kl_r8_lo(kl_b32 p) { return _mm256_and_si256(p, _mm256_set1_epi8(0x0F)); }
KL_INLINE kl_b32 kl_r8_hi(kl_b32 p) { return _mm256_and_si256(_mm256_srli_epi16(p, 4), _mm256_set1_epi8(0x0F)); }

/* nib's bytes (0..15) with bit r of h's byte as bit 4 (r a compile-time constant). AVX-512 BW: a test into a
 * mask register and a masked add of 16; else one immediate shift (bits crossing bytes are masked off), and, or. */
KL_INLINE kl_b32 kl_r8_code(kl_b32 nib, kl_b32 h, const int r) {
#if defined(__AVX512BW__) && defined(__AVX512VL__)
    const __mmask32 k = _mm256_test_epi8_mask(h, _mm256_set1_epi8((char)(1 << r)));
    return _mm256_mask_add_epi8(nib, k, nib, _mm256_set1_epi8(16));
#else
    const __m256i a = r < 4 ? _mm256_slli_epi16(h, 4 - r) : r > 4 ? _mm256_srli_epi16(h, r - 4) : h;
    return _mm256_or_si256(nib, _mm256_and_si256(a, _mm256_set1_epi8(0x10)));
#endif
}

/* Lane l = (float) of seed[l] + the exact int32 sum of c[4l+i] * x[4l+i] (c unsigned codes <= 31, x signed),
 * minus the magic: one vpdpbusd with VNNI, else vpmaddubsw (int16 pairs <= 2 * 31 * 128: exact) + vpmaddwd. */
KL_INLINE kl_f8 kl_r8_dot(kl_b32 c, kl_b32 x, kl_b32 seed) {
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
    const __m256i s = _mm256_dpbusd_epi32(seed, c, x);
#else
    const __m256i s = _mm256_add_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(c, x), _mm256_set1_epi16(1)), seed);
#endif
    return _mm256_sub_ps(_mm256_castsi256_ps(s), _mm256_set1_ps(KL_MAGIC_F));
}

/* Lane l = (float) the exact int32 sum of c[4l+i] * x[4l+i] (no seed: the formats without a code offset): the
 * int32 lanes converted as they are, one op fewer than the seed's add and the magic's subtract. */
KL_INLINE kl_f8 kl_r8_dot0(kl_b32 c, kl_b32 x) {
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
    const __m256i s = _mm256_dpbusd_epi32(_mm256_setzero_si256(), c, x);
#else
    const __m256i s = _mm256_madd_epi16(_mm256_maddubs_epi16(c, x), _mm256_set1_epi16(1));
#endif
    return _mm256_cvtepi32_ps(s);
}

/* Both blocks of a q32_r8 tile's 8 rows (nib: the tile's 8 x 32 nibble bytes): lane r of *s0 = (float)(base0 + the
 * exact int32 sum of lo(nib[32r + i]) * x0[i], i < 32), of *s1 the same with the high nibbles, x1 and base1. The 8
 * rows' bytes are transposed as dwords first (lane r of t[j] = row r's bytes 4j..4j+3: 24 shuffles, for both
 * blocks), so dword j of the activation is a broadcast load and the products of row r land in lane r: with VNNI
 * 8 vpdpbusd per block and no reduction, else vpmaddubsw summed in int16 (a word sums 16 products, |.| <= 30720)
 * and one vpmaddwd. */
KL_INLINE void kl_r8_sums2(const uint8_t *nib, const int8_t *x0, const int8_t *x1, int32_t base0, int32_t base1,
                           kl_f8 *s0, kl_f8 *s1) {
    __m256i a[8], b[8];
    for (int r = 0; r < 8; r++) a[r] = _mm256_loadu_si256((const __m256i *)(nib + 32 * r));
    for (int r = 0; r < 8; r += 2) { /* per half dwords: (r, r + 1) of dwords 0, 1 / 2, 3 */
        b[r] = _mm256_unpacklo_epi32(a[r], a[r + 1]);
        b[r + 1] = _mm256_unpackhi_epi32(a[r], a[r + 1]);
    }
    for (int r = 0; r < 8; r += 4) /* per half: rows r .. r + 3 of one dword */
        for (int k = 0; k < 2; k++) {
            a[r + 2 * k] = _mm256_unpacklo_epi64(b[r + k], b[r + 2 + k]);
            a[r + 2 * k + 1] = _mm256_unpackhi_epi64(b[r + k], b[r + 2 + k]);
        }
    /* a[k] (k < 4): rows 0..3's dword k (low half) and k + 4 (high half); a[4 + k] the same of rows 4..7 */
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    __m256i acc0 = _mm256_setzero_si256(), acc1 = _mm256_setzero_si256(), tr[8];
    for (int k = 0; k < 4; k++) { /* tr[j] lane r: dword j of row r (immediates written out: the loop below need not unroll) */
        tr[k] = _mm256_permute2x128_si256(a[k], a[4 + k], 0x20);
        tr[k + 4] = _mm256_permute2x128_si256(a[k], a[4 + k], 0x31);
    }
    for (int j = 0; j < 8; j++) {
        const __m256i t = tr[j];
        const __m256i lo = _mm256_and_si256(t, m4), hi = _mm256_and_si256(_mm256_srli_epi16(t, 4), m4);
        int32_t d0, d1;
        memcpy(&d0, x0 + 4 * j, 4);
        memcpy(&d1, x1 + 4 * j, 4);
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
        acc0 = _mm256_dpbusd_epi32(acc0, lo, _mm256_set1_epi32(d0));
        acc1 = _mm256_dpbusd_epi32(acc1, hi, _mm256_set1_epi32(d1));
#else
        acc0 = _mm256_add_epi16(acc0, _mm256_maddubs_epi16(lo, _mm256_set1_epi32(d0)));
        acc1 = _mm256_add_epi16(acc1, _mm256_maddubs_epi16(hi, _mm256_set1_epi32(d1)));
#endif
    }
#if !(defined(__AVX512VNNI__) && defined(__AVX512VL__))
    acc0 = _mm256_madd_epi16(acc0, _mm256_set1_epi16(1));
    acc1 = _mm256_madd_epi16(acc1, _mm256_set1_epi16(1));
#endif
    *s0 = _mm256_cvtepi32_ps(_mm256_add_epi32(acc0, _mm256_set1_epi32(base0)));
    *s1 = _mm256_cvtepi32_ps(_mm256_add_epi32(acc1, _mm256_set1_epi32(base1)));
}

#endif /* KM_LANES_X86_H */
