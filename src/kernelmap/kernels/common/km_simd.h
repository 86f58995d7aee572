/* km_simd.h — the scalar trees of the kernelmap-order linear refs, and the SIMD helpers of the hand-written
 * AVX-512 VNNI 32-block linear kernels (linear/q32_vnni.h; not yet lanes instantiations, see km_lanes.h).
 *
 * Contract: every helper is exact integer work or a fixed sequence of IEEE float operations, so
 * kernels that use them keep the reduction order their own contract states. The AVX2 helpers are
 * compiled only when __AVX2__ is defined, the AVX-512 ones only when __AVX512F__ and __AVX512BW__
 * are, and dot products use VNNI (vpdpbusd) only when the file is compiled with -mavx512vnni.
 *
 * Shared numerics of the 32-block integer-dot linear contracts (linear.q{8,5,4}_0.q8_0.f32.v1):
 * for output y[m][n], block b of the row contributes isum_b = the exact int32 sum of its 32 products
 * and t_b = fp16(w.d_b) * fp16(x.d_b) (one f32 multiply); partial p[b mod 8] = fmaf(t_b, (float)isum_b,
 * p[b mod 8]) in increasing b, all eight partials starting at +0; then
 * y = ((p0 + p4) + (p2 + p6)) + ((p1 + p5) + (p3 + p7)). km_tree8() is that final tree.
 */
#ifndef KM_SIMD_H
#define KM_SIMD_H

#include <math.h>

#include "km_common.h"

/* The fixed 8-partial tree of the 32-block linear contracts (scalar form, used by every ref). */
static inline float km_tree8(const float p[8]) {
    return ((p[0] + p[4]) + (p[2] + p[6])) + ((p[1] + p[5]) + (p[3] + p[7]));
}

/* The fixed 16-partial tree of the float linear contracts: fold halves 8, 4, 2, 1 (scalar form). */
static inline float km_tree16(const float p[16]) {
    float s8[8];
    for (int l = 0; l < 8; l++) s8[l] = p[l] + p[l + 8];
    return km_tree8(s8);
}

#if defined(__AVX2__)
#include <immintrin.h>

#define KM_ALWAYS_INLINE static inline __attribute__((always_inline))

/* km_tree8 on the eight lanes of a vector: ((p0+p4)+(p2+p6)) + ((p1+p5)+(p3+p7)). */
static inline float km_avx2_tree8(__m256 p) {
    __m128 a = _mm_add_ps(_mm256_castps256_ps128(p), _mm256_extractf128_ps(p, 1));
    __m128 b = _mm_add_ps(a, _mm_movehl_ps(a, a));
    __m128 c = _mm_add_ss(b, _mm_shuffle_ps(b, b, 1));
    return _mm_cvtss_f32(c);
}

/* Lane j of the result = the sum of all eight lanes of v[j] (exact int32 addition). */
static inline __m256i km_avx2_reduce8_i32(const __m256i v[8]) {
    __m256i h01 = _mm256_hadd_epi32(v[0], v[1]);
    __m256i h23 = _mm256_hadd_epi32(v[2], v[3]);
    __m256i h45 = _mm256_hadd_epi32(v[4], v[5]);
    __m256i h67 = _mm256_hadd_epi32(v[6], v[7]);
    __m256i h0123 = _mm256_hadd_epi32(h01, h23);
    __m256i h4567 = _mm256_hadd_epi32(h45, h67);
    __m256i lo = _mm256_permute2x128_si256(h0123, h4567, 0x20);
    __m256i hi = _mm256_permute2x128_si256(h0123, h4567, 0x31);
    return _mm256_add_epi32(lo, hi);
}

/* Eight f16 values read at p, p + stride, ..., p + 7*stride bytes, converted exactly to f32.
 * The halves are packed in general registers (ALU work that overlaps the vector dot products). */
static inline __m256 km_avx2_f16x8_strided(const void *p, int64_t stride) {
    const uint8_t *b = (const uint8_t *)p;
    uint64_t q[2] = {0, 0};
    for (int j = 0; j < 8; j++) {
        uint16_t h;
        memcpy(&h, b + j * stride, 2);
        q[j >> 2] |= (uint64_t)h << (16 * (j & 3));
    }
    return _mm256_cvtph_ps(_mm_set_epi64x((long long)q[1], (long long)q[0]));
}

/* Like km_avx2_f16x8_strided but only the first n (< 8) values; the other lanes are +0. */
static inline __m256 km_avx2_f16x8_strided_n(const void *p, int64_t stride, int n) {
    const uint8_t *b = (const uint8_t *)p;
    uint64_t q[2] = {0, 0};
    for (int j = 0; j < n; j++) {
        uint16_t h;
        memcpy(&h, b + j * stride, 2);
        q[j >> 2] |= (uint64_t)h << (16 * (j & 3));
    }
    return _mm256_cvtph_ps(_mm_set_epi64x((long long)q[1], (long long)q[0]));
}

/* 32 int8 values from 16 packed nibbles: low nibbles are elements 0..15, high nibbles 16..31. */
static inline __m256i km_avx2_nibbles32(const uint8_t *qs) {
    __m128i q = _mm_loadu_si128((const __m128i *)qs);
    __m256i both = _mm256_set_m128i(_mm_srli_epi16(q, 4), q);
    return _mm256_and_si256(both, _mm256_set1_epi8(0x0F));
}

/* q8_0 block -> 32 unsigned operands w + 128 (w ^ 0x80); only for VNNI (no int16 step). */
static inline __m256i km_avx2_u_q8_0(const uint8_t *blk) {
    return _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(blk + 2)), _mm256_set1_epi8((char)0x80));
}

typedef __m256i (*km_avx2_wload)(const uint8_t *blk);

#endif /* __AVX2__ */

#if defined(__AVX512F__) && defined(__AVX512BW__)

/* Two blocks' weights in one register: block a in the low 256 bits, block b in the high. */
static inline __m512i km_avx512_pair(__m256i a, __m256i b) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(a), b, 1);
}

/* q5_0 block -> 32 unsigned quants (nibble | qh bit << 4) in [0, 31]; the weight is this minus 16. */
static inline __m256i km_avx512_u_q5_0(const uint8_t *blk) {
    uint32_t bits;
    memcpy(&bits, blk + 2, 4);
    __m256i lo = km_avx2_nibbles32(blk + 6);
    return _mm256_mask_add_epi8(lo, (__mmask32)bits, lo, _mm256_set1_epi8(16));
}

/* The f16 scales (first two bytes) of n <= 8 consecutive blocks of wblk bytes (wblk even) at p,
 * converted exactly to f32, lanes >= n zero: masked 64-byte loads (never past the last scale) and
 * 16-bit permutes instead of n scalar loads. */
static inline __m256 km_avx512_f16x8_blocks(const uint8_t *p, const int64_t wblk, const int n) {
    const int hw = (int)(wblk / 2);
    const int last = (n - 1) * hw;
    __m512i z[4];
    for (int k = 0; k < 4; k++) {
        const int lo = 32 * k;
        const int cnt = last + 1 - lo > 32 ? 32 : last + 1 - lo;
        z[k] = cnt <= 0 ? _mm512_setzero_si512()
                        : _mm512_maskz_loadu_epi16(cnt == 32 ? 0xFFFFFFFFu : (1u << cnt) - 1u, p + 64 * k);
    }
    const __m512i pos = _mm512_mullo_epi16(_mm512_cvtepu8_epi16(_mm256_setr_epi8(
        0, 1, 2, 3, 4, 5, 6, 7, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)),
        _mm512_set1_epi16((short)hw));
    const __m512i idx = _mm512_and_si512(pos, _mm512_set1_epi16(63));
    const __mmask32 keep = (__mmask32)((1u << n) - 1u);
    __m512i r = _mm512_maskz_permutex2var_epi16(keep, z[0], idx, z[1]);
    if (last >= 64) {
        const __mmask32 hi = _mm512_cmpge_epu16_mask(pos, _mm512_set1_epi16(64)) & keep;
        r = _mm512_mask_blend_epi16(hi, r, _mm512_permutex2var_epi16(z[2], idx, z[3]));
    }
    return _mm256_cvtph_ps(_mm512_castsi512_si128(r));
}

/* Sixteen int32 lanes, each an exact sum of 4 adjacent products. off == 0: w and x signed (x in
 * [-127, 127]); off > 0: u unsigned (u * x summed, the caller subtracts off * sum x). Without VNNI
 * the pairwise int16 step must not saturate: off > 0 then needs u <= 31 (q4_0, q5_0). */
static inline __m512i km_avx512_dot(__m512i u, __m512i x, const int off) {
    if (off == 0) {
        __mmask64 neg = _mm512_movepi8_mask(u);
        __m512i aw = _mm512_abs_epi8(u);
        x = _mm512_mask_sub_epi8(x, neg, _mm512_setzero_si512(), x);
        u = aw;
    }
#if defined(__AVX512VNNI__)
    return _mm512_dpbusd_epi32(_mm512_setzero_si512(), u, x);
#else
    return _mm512_madd_epi16(_mm512_maddubs_epi16(u, x), _mm512_set1_epi16(1));
#endif
}

/* z[k] holds blocks 2k (low 8 lanes) and 2k+1 (high 8 lanes); lane j of the result = block j's total. */
static inline __m256i km_avx512_reduce8_i32(const __m512i z[4]) {
    const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    const __m512i odd = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
    __m512i p = _mm512_add_epi32(_mm512_permutex2var_epi32(z[0], even, z[1]),
                                 _mm512_permutex2var_epi32(z[0], odd, z[1]));
    __m512i q = _mm512_add_epi32(_mm512_permutex2var_epi32(z[2], even, z[3]),
                                 _mm512_permutex2var_epi32(z[2], odd, z[3]));
    __m512i r = _mm512_add_epi32(_mm512_permutex2var_epi32(p, even, q),
                                 _mm512_permutex2var_epi32(p, odd, q));
    __m512i s = _mm512_add_epi32(r, _mm512_srli_epi64(r, 32));
    return _mm512_cvtepi64_epi32(s);
}

/* One group of n <= 8 blocks starting at block b, for R weight rows x T activation rows: updates
 * acc[r][t] (partial lanes = block mod 8) with the contract's fmaf(t_b, isum_b, p). Weight quants
 * are unpacked once per row and reused by every activation row; activation pairs, scales and the
 * offset correction are prepared once per activation row and reused by every weight row. */
KM_ALWAYS_INLINE void km_avx512_q32_group(__m256 acc[4][4], const uint8_t *w, int64_t wrow, int64_t wblk,
                                          km_avx2_wload load, const int off, const km_block_q8_0 *x,
                                          int64_t xrow, int64_t b, const int n, const int R, const int T) {
    __m512i xp[4][4];
    __m256i xsum[4];
    __m256 dx[4];
    for (int t = 0; t < T; t++) {
        const km_block_q8_0 *xt = x + t * xrow + b;
        for (int k = 0; k < 4; k++) {
            const __m256i *a = (const __m256i *)xt[2 * k].qs, *c = (const __m256i *)xt[2 * k + 1].qs;
            __m256i x0 = 2 * k < n ? _mm256_loadu_si256(a) : _mm256_setzero_si256();
            __m256i x1 = 2 * k + 1 < n ? _mm256_loadu_si256(c) : _mm256_setzero_si256();
            xp[t][k] = km_avx512_pair(x0, x1);
        }
        dx[t] = km_avx512_f16x8_blocks((const uint8_t *)xt, sizeof(km_block_q8_0), n);
        if (off > 0) {
            __m512i s[4];
            for (int k = 0; k < 4; k++) {
                const __m512i o = _mm512_set1_epi8((char)off);
                s[k] = 2 * k < n ? km_avx512_dot(o, xp[t][k], 1) : _mm512_setzero_si512();
            }
            xsum[t] = km_avx512_reduce8_i32(s);
        }
    }
    for (int r = 0; r < R; r++) {
        const uint8_t *wr = w + r * wrow + b * wblk;
        __m512i wp[4];
        for (int k = 0; k < 4; k++) {
            __m256i w0 = 2 * k < n ? load(wr + 2 * k * wblk) : _mm256_setzero_si256();
            __m256i w1 = 2 * k + 1 < n ? load(wr + (2 * k + 1) * wblk) : _mm256_setzero_si256();
            wp[k] = km_avx512_pair(w0, w1);
        }
        __m256 dw = km_avx512_f16x8_blocks(wr, wblk, n);
        for (int t = 0; t < T; t++) {
            __m512i v[4];
            for (int k = 0; k < 4; k++) {
                v[k] = 2 * k < n ? km_avx512_dot(wp[k], xp[t][k], off) : _mm512_setzero_si512();
            }
            __m256i isum = km_avx512_reduce8_i32(v);
            if (off > 0) isum = _mm256_sub_epi32(isum, xsum[t]);
            acc[r][t] = _mm256_fmadd_ps(_mm256_mul_ps(dw, dx[t]), _mm256_cvtepi32_ps(isum), acc[r][t]);
        }
    }
}

/* R x T outputs y[t][r] (y rows ystride apart) over the whole K. */
KM_ALWAYS_INLINE void km_avx512_q32_tile(float *y, int64_t ystride, const uint8_t *w, int64_t wrow,
                                         int64_t wblk, km_avx2_wload load, const int off,
                                         const km_block_q8_0 *x, int64_t nb, const int R, const int T) {
    __m256 acc[4][4];
    for (int r = 0; r < R; r++)
        for (int t = 0; t < T; t++) acc[r][t] = _mm256_setzero_ps();
    int64_t b = 0;
    for (; b + 8 <= nb; b += 8) km_avx512_q32_group(acc, w, wrow, wblk, load, off, x, nb, b, 8, R, T);
    switch (nb - b) { /* the tail, with its block count a compile-time constant */
    case 0: break;
    case 1: km_avx512_q32_group(acc, w, wrow, wblk, load, off, x, nb, b, 1, R, T); break;
    case 2: km_avx512_q32_group(acc, w, wrow, wblk, load, off, x, nb, b, 2, R, T); break;
    case 3: km_avx512_q32_group(acc, w, wrow, wblk, load, off, x, nb, b, 3, R, T); break;
    case 4: km_avx512_q32_group(acc, w, wrow, wblk, load, off, x, nb, b, 4, R, T); break;
    case 5: km_avx512_q32_group(acc, w, wrow, wblk, load, off, x, nb, b, 5, R, T); break;
    case 6: km_avx512_q32_group(acc, w, wrow, wblk, load, off, x, nb, b, 6, R, T); break;
    default: km_avx512_q32_group(acc, w, wrow, wblk, load, off, x, nb, b, 7, R, T); break;
    }
    for (int r = 0; r < R; r++)
        for (int t = 0; t < T; t++) y[t * ystride + r] = km_avx2_tree8(acc[r][t]);
}

/* The whole linear.token_major.v1 call for a 32-block weight format with AVX-512: columns [lo, hi)
 * of this thread in tiles of 4 weight rows; activation rows 4 at a time (prefill) or one at a time. */
KM_ALWAYS_INLINE void km_avx512_q32_linear(float *y, const void *w, const void *x, int64_t M, int64_t N,
                                           int64_t K, int ith, int nth, int64_t wblk, km_avx2_wload load,
                                           const int off) {
    int64_t lo, hi;
    km_part(N, ith, nth, &lo, &hi);
    const int64_t nb = K / KM_QK8_0;
    const int64_t wrow = nb * wblk;
    const uint8_t *wb = (const uint8_t *)w;
    const km_block_q8_0 *xb = (const km_block_q8_0 *)x;
    int64_t n = lo;
    for (; n + 4 <= hi; n += 4) {
        const uint8_t *wt = wb + n * wrow;
        int64_t m = 0;
        for (; m + 4 <= M; m += 4) km_avx512_q32_tile(&y[m * N + n], N, wt, wrow, wblk, load, off, xb + m * nb, nb, 4, 4);
        for (; m < M; m++) km_avx512_q32_tile(&y[m * N + n], N, wt, wrow, wblk, load, off, xb + m * nb, nb, 4, 1);
    }
    for (; n < hi; n++) {
        const uint8_t *wt = wb + n * wrow;
        int64_t m = 0;
        for (; m + 4 <= M; m += 4) km_avx512_q32_tile(&y[m * N + n], N, wt, wrow, wblk, load, off, xb + m * nb, nb, 1, 4);
        for (; m < M; m++) km_avx512_q32_tile(&y[m * N + n], N, wt, wrow, wblk, load, off, xb + m * nb, nb, 1, 1);
    }
}
#endif /* __AVX512F__ && __AVX512BW__ */

#endif /* KM_SIMD_H */
