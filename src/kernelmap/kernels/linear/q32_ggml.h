/* linear/q32_ggml.h — the shared SIMD body of linear.q5_0.q8_0.ggml.v1 and linear.q8_0.q8_0.ggml.v1.
 *
 * Numerics exactly as linear/q5_0_q8_0_ggml_ref.c states (llama.cpp's x86 order): per 32-block b,
 * eight exact int32 lanes, lane l = sum of the 4 products at 4l..4l+3; t = f32(fp16(w.d) * fp16(x.d));
 * acc[l] = fma(t, (float)lane[l], acc[l]) for b increasing from +0; fold l+4, then 0+2 / 1+3, then 0+1.
 * Integer tricks (exact): (float)lane is taken as bits(lane + 0x4B400000) - 12582912.0f (exact for
 * |lane| < 2^22; lanes here are < 2^16), the magic constant folded into the int dot's seed.
 * VNNI prefill: unsigned operand x + 128 (x ^ 0x80, re-laid once per activation row), signed weight
 * (q5_0 code - 16, q8_0 int8), seed 0x4B400000 - 128 * ws4 (ws4 = sum of lane l's 4 weights, one
 * vpdpbusd per weight block, reused by every activation row). Without VNNI (maddubs): unsigned q5_0
 * code with the activation-side seed 0x4B400000 - 16 * xs4 (xs4 = sum of lane l's 4 activation
 * quants, per activation block), or |w| and sign(x, w) for q8_0 with an exact cvtdq2ps. One-row
 * decode with VNNI: unsigned weight code (w + 16, w ^ 0x80) and the activation-side seed.
 * t = f32(dw * dx) is computed for 8 blocks at once and taken lane by lane (permute or broadcast).
 *
 * Prefill, AVX-512: one zmm accumulator holds two outputs (weight rows A, B; one activation row)
 * with their lanes interleaved (even lanes A, odd lanes B): weights of A and B are interleaved per
 * 4-byte group, each activation block is re-laid with every 4-byte group doubled, and t arrives as
 * the pair (t_A, t_B) broadcast as one 64-bit value. Tiles: 1 row pair x 16/8/4/2/1 activation
 * rows, weights of the tile after next prefetched. AVX2: one ymm accumulator per output, tiles of 2
 * rows x 4/2/1 activation rows. Decode (M = 1, both ISAs): KM_Q32G_R1 = 2 adjacent weight rows block
 * by block, one ymm accumulator each (two independent fma chains); software prefetch to L2
 * KM_Q32G_PF bytes ahead of each row.
 * Columns go in chunks of KM_Q32G_NC (weights of a chunk stay in L2 across activation tiles); K
 * goes in slices of KM_Q32G_KS blocks (accumulators parked in a stack buffer between slices).
 * Stack use: about 240 KB (AVX-512: 16 re-laid activation rows + parked accumulators), 50 KB (AVX2).
 * Partition: output columns n (km_part over N); no output depends on M, tiling or (ith, nth).
 * The including file defines nothing; it calls km_q32g_linear with fmt 5 (q5_0) or 8 (q8_0).
 */
#ifndef KM_Q32_GGML_H
#define KM_Q32_GGML_H

#include "km_common.h"
#include "km_simd.h"

#define KM_Q32G_KS 64  /* blocks per K slice (K = 2048 in one slice) */
#define KM_Q32G_NC 128 /* columns per chunk */
#define KM_Q32G_MAGIC 0x4B400000 /* bits of 12582912.0f = 1.5 * 2^23 */
#ifndef KM_Q32G_R1
#define KM_Q32G_R1 2 /* decode: weight rows per step */
#endif

#if defined(__AVX512F__) && defined(__AVX512BW__)
#define KM_Q32G_TT 16 /* activation rows per tile */
#define KM_Q32G_RP 1 /* weight row pairs per tile when T > 1 */
#define KM_Q32G_RPD 2 /* array bound: row pairs per tile */
#ifndef KM_Q32G_PF
#define KM_Q32G_PF 8192 /* decode: prefetch distance in bytes (to L2) */
#endif
#define KM_Q32G_PFT 4 /* prefill: prefetch distance in weight rows */
#define KM_Q32G_NACC 16 /* accumulators per tile: RP * TT */
#define KM_Q32G_PARK (KM_Q32G_NC * KM_Q32G_TT / 2) /* parked accumulators per chunk (one per 2 columns x row) */

/* One activation row's slice, re-laid: each 4-byte group of a block doubled (64 bytes), the int dot
 * seed 0x4B400000 - off * xs4 doubled likewise, and fp16(x.d) doubled (zero past the slice). */
typedef struct {
    __m512i xq[KM_Q32G_KS];
    __m512i seed[KM_Q32G_KS];
    __m256i seed8[KM_Q32G_KS]; /* the seed, not doubled (one-row decode path) */
    float dxd[2 * KM_Q32G_KS];
    float dx[KM_Q32G_KS + 8];
    const km_block_q8_0 *x;
} km_q32g_xrow;

typedef __m512 km_q32g_acc;

KM_ALWAYS_INLINE void km_q32g_prep(km_q32g_xrow *r, const km_block_q8_0 *x, int64_t ks, const int off) {
    const __m512i dup = _mm512_set_epi32(7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0);
    const int sh = off == 16 ? 4 : 7;
    for (int64_t b = 0; b < ks; b++) {
        const __m256i v = _mm256_loadu_si256((const __m256i *)x[b].qs);
        const __m256i s = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), v), _mm256_set1_epi16(1));
        __m256i seed = _mm256_set1_epi32(KM_Q32G_MAGIC);
        if (off > 0) seed = _mm256_sub_epi32(seed, _mm256_slli_epi32(s, sh));
#if defined(__AVX512VNNI__)
        /* VNNI tiles take the activations as the unsigned operand: x + 128 = x ^ 0x80 */
        r->xq[b] = _mm512_permutexvar_epi32(dup, _mm512_castsi256_si512(_mm256_xor_si256(v, _mm256_set1_epi8((char)0x80))));
#else
        r->xq[b] = _mm512_permutexvar_epi32(dup, _mm512_castsi256_si512(v));
#endif
        r->seed[b] = _mm512_permutexvar_epi32(dup, _mm512_castsi256_si512(seed));
        r->seed8[b] = seed;
        const float d = km_fp16_to_fp32(x[b].d);
        r->dxd[2 * b] = d;
        r->dxd[2 * b + 1] = d;
        r->dx[b] = d;
    }
    for (int64_t b = ks; b < ((ks + 7) & ~(int64_t)7); b++) {
        r->dxd[2 * b] = 0.0f;
        r->dxd[2 * b + 1] = 0.0f;
        r->dx[b] = 0.0f;
    }
    r->x = x;
}

/* The weights of block b of rows A and B, 4-byte groups interleaved (A0 B0 A1 B1 ... A7 B7), as the
 * dot's first operand: unsigned codes (q5_0; q8_0 with VNNI) or signed int8 (q8_0 without VNNI). */
KM_ALWAYS_INLINE __m512i km_q32g_wpair(const uint8_t *a, const uint8_t *b, const int fmt) {
    if (fmt == 8) {
        const __m512i il = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
        __m512i z = _mm512_permutex2var_epi32(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(a + 2))), il,
                                              _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(b + 2))));
        return z;
    }
    /* q5_0: qs dwords interleaved, low nibbles in the low 256 bits, high nibbles in the high 256 bits;
     * element e of A sits at byte 8 * (e / 4) + e % 4, of B 4 bytes later: the 5th bits by pdep. */
    const __m128i qa = _mm_loadu_si128((const __m128i *)(a + 6));
    const __m128i qb = _mm_loadu_si128((const __m128i *)(b + 6));
    const __m256i c = _mm256_set_m128i(_mm_unpackhi_epi32(qa, qb), _mm_unpacklo_epi32(qa, qb));
    __m512i z = _mm512_inserti64x4(_mm512_castsi256_si512(c), c, 1);
    z = _mm512_srlv_epi16(z, _mm512_set_epi64(0x0004000400040004LL, 0x0004000400040004LL, 0x0004000400040004LL,
                                              0x0004000400040004LL, 0, 0, 0, 0));
    z = _mm512_and_si512(z, _mm512_set1_epi8(0x0F));
    uint32_t ha, hb;
    memcpy(&ha, a + 2, 4);
    memcpy(&hb, b + 2, 4);
    const uint64_t m = _pdep_u64(ha, 0x0F0F0F0F0F0F0F0FULL) | _pdep_u64(hb, 0xF0F0F0F0F0F0F0F0ULL);
#if defined(__AVX512VNNI__)
    return _mm512_mask_sub_epi8(z, (__mmask64)~m, z, _mm512_set1_epi8(0x10)); /* signed: code - 16 */
#else
    return _mm512_mask_add_epi8(z, (__mmask64)m, z, _mm512_set1_epi8(0x10)); /* unsigned code */
#endif
}

/* (float) of the 16 interleaved int32 lanes of weight pair w against one re-laid activation block. */
KM_ALWAYS_INLINE __m512 km_q32g_lanes(__m512i w, __m512i wabs, __mmask64 neg, const __m512i *xq,
                                      const __m512i *seed, const int fmt) {
    const __m512 magic = _mm512_set1_ps(12582912.0f);
#if defined(__AVX512VNNI__)
    (void)neg;
    (void)fmt;
    (void)seed; /* wabs carries the weight-side seed 0x4B400000 - 128 * ws4 */
    return _mm512_sub_ps(_mm512_castsi512_ps(_mm512_dpbusd_epi32(wabs, _mm512_load_si512(xq), w)), magic);
#else
    const __m512i one = _mm512_set1_epi16(1);
    if (fmt == 8) {
        const __m512i x = _mm512_load_si512(xq);
        const __m512i xs = _mm512_mask_sub_epi8(x, neg, _mm512_setzero_si512(), x);
        (void)seed;
        (void)w;
        return _mm512_cvtepi32_ps(_mm512_madd_epi16(_mm512_maddubs_epi16(wabs, xs), one));
    }
    (void)wabs;
    (void)neg;
    const __m512i p = _mm512_madd_epi16(_mm512_maddubs_epi16(w, _mm512_load_si512(xq)), one);
    return _mm512_sub_ps(_mm512_castsi512_ps(_mm512_add_epi32(p, _mm512_load_si512(seed))), magic);
#endif
}

/* fp16 scales of n <= 8 blocks of rows A and B, interleaved (A0 B0 A1 B1 ...), as f32. */
KM_ALWAYS_INLINE __m512 km_q32g_dwpair(const uint8_t *a, const uint8_t *b, int64_t wblk, int n) {
    const __m512i il = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    return _mm512_permutex2var_ps(_mm512_castps256_ps512(km_avx2_f16x8_strided_n(a, wblk, n)), il,
                                  _mm512_castps256_ps512(km_avx2_f16x8_strided_n(b, wblk, n)));
}

/* One group of n (compile-time, <= 8) blocks at block g of the slice for RP row pairs x T activation
 * rows. t for the group is one product vector per (pair, activation row): (tA, tB) of block j is its
 * 64-bit element j, taken by a permute (T <= 2) or, when the tile has many accumulators, stored to
 * the stack buffer tb and broadcast from there. */
KM_ALWAYS_INLINE void km_q32g_group(__m512 *acc, const uint8_t *const *ra, const uint8_t *const *rb, int64_t g,
                                    int64_t wrow, int64_t wblk, const int fmt, const km_q32g_xrow *xr, const int RP, const int T,
                                    const int n) {
    const int reg = T <= 2;
    for (int p = 0; p < RP; p++) /* the same blocks of the tile after next (prefetchers miss the 2 streams) */
        for (int64_t o = 0; o < n * wblk; o += 64) {
            _mm_prefetch((const char *)(ra[p] + g * wblk + KM_Q32G_PFT * wrow + o), _MM_HINT_T0);
            _mm_prefetch((const char *)(rb[p] + g * wblk + KM_Q32G_PFT * wrow + o), _MM_HINT_T0);
        }
    __m512 tv[KM_Q32G_NACC];
    float tb[KM_Q32G_NACC][16] __attribute__((aligned(64)));
    for (int p = 0; p < RP; p++) {
        const __m512 dw = km_q32g_dwpair(ra[p] + g * wblk, rb[p] + g * wblk, wblk, n);
        for (int t = 0; t < T; t++) {
            const __m512 v = _mm512_mul_ps(dw, _mm512_loadu_ps(xr[t].dxd + 2 * g));
            if (reg) tv[p * T + t] = v;
            else _mm512_store_ps(tb[p * T + t], v);
        }
    }
    for (int j = 0; j < n; j++) {
        const int64_t b = g + j;
        __m512i wp[KM_Q32G_RPD], wa[KM_Q32G_RPD];
        __mmask64 ng[KM_Q32G_RPD];
        for (int p = 0; p < RP; p++) {
            wp[p] = km_q32g_wpair(ra[p] + b * wblk, rb[p] + b * wblk, fmt);
#if defined(__AVX512VNNI__)
            { /* lane = sum (x + 128) * w - 128 * ws4, ws4[l] = sum of lane l's 4 weights */
                const __m512i ws4 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(1), wp[p]);
                ng[p] = 0;
                wa[p] = _mm512_sub_epi32(_mm512_set1_epi32(KM_Q32G_MAGIC), _mm512_slli_epi32(ws4, 7));
            }
#else
            if (fmt == 8) {
                ng[p] = _mm512_movepi8_mask(wp[p]);
                wa[p] = _mm512_abs_epi8(wp[p]);
            } else {
                ng[p] = 0;
                wa[p] = wp[p];
            }
#endif
        }
        for (int t = 0; t < T; t++) {
            for (int p = 0; p < RP; p++) {
                const __m512 f = km_q32g_lanes(wp[p], wa[p], ng[p], &xr[t].xq[b], &xr[t].seed[b], fmt);
                const __m512 tj = reg ? _mm512_castpd_ps(_mm512_permutexvar_pd(_mm512_set1_epi64(j),
                                                                               _mm512_castps_pd(tv[p * T + t])))
                                      : _mm512_castpd_ps(_mm512_broadcastsd_pd(_mm_load_sd((const double *)&tb[p * T + t][2 * j])));
                acc[p * T + t] = _mm512_fmadd_ps(tj, f, acc[p * T + t]);
            }
        }
    }
}

/* One tile: rows row0 .. row0 + R - 1 (R <= 2 * RP; a missing B row repeats A and is not written)
 * x T activation rows, over blocks [0, ks) of the current slice (weights at w + row * wrow).
 * first: accumulators start at +0, else from park; last: fold and store y, else park them. */
KM_ALWAYS_INLINE void km_q32g_tile(float *y, int64_t ystride, const uint8_t *w, int64_t wrow, int64_t wblk,
                                   const int fmt, const km_q32g_xrow *xr, int64_t ks, int first, int last,
                                   km_q32g_acc *park, const int RP, const int T, int R) {
    __m512 acc[KM_Q32G_NACC];
    const uint8_t *ra[KM_Q32G_RPD], *rb[KM_Q32G_RPD];
    for (int p = 0; p < RP; p++) {
        const int ia = 2 * p < R ? 2 * p : R - 1;
        const int ib = 2 * p + 1 < R ? 2 * p + 1 : ia;
        ra[p] = w + ia * wrow;
        rb[p] = w + ib * wrow;
    }
    for (int i = 0; i < RP * T; i++) acc[i] = first ? _mm512_setzero_ps() : park[i];
    int64_t g = 0;
    for (; g + 8 <= ks; g += 8) km_q32g_group(acc, ra, rb, g, wrow, wblk, fmt, xr, RP, T, 8);
    switch (ks - g) { /* the tail, with its block count a compile-time constant */
    case 0: break;
    case 1: km_q32g_group(acc, ra, rb, g, wrow, wblk, fmt, xr, RP, T, 1); break;
    case 2: km_q32g_group(acc, ra, rb, g, wrow, wblk, fmt, xr, RP, T, 2); break;
    case 3: km_q32g_group(acc, ra, rb, g, wrow, wblk, fmt, xr, RP, T, 3); break;
    case 4: km_q32g_group(acc, ra, rb, g, wrow, wblk, fmt, xr, RP, T, 4); break;
    case 5: km_q32g_group(acc, ra, rb, g, wrow, wblk, fmt, xr, RP, T, 5); break;
    case 6: km_q32g_group(acc, ra, rb, g, wrow, wblk, fmt, xr, RP, T, 6); break;
    default: km_q32g_group(acc, ra, rb, g, wrow, wblk, fmt, xr, RP, T, 7); break;
    }
    if (!last) {
        for (int i = 0; i < RP * T; i++) park[i] = acc[i];
        return;
    }
    for (int p = 0; p < RP; p++) {
        for (int t = 0; t < T; t++) {
            const __m512 a = acc[p * T + t];
            const __m256 h = _mm256_add_ps(_mm512_castps512_ps256(a), _mm512_extractf32x8_ps(a, 1));
            const __m128 g = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
            const __m128 v = _mm_add_ps(g, _mm_movehl_ps(g, g));
            float o[4];
            _mm_storeu_ps(o, v);
            if (2 * p < R) y[t * ystride + 2 * p] = o[0];
            if (2 * p + 1 < R) y[t * ystride + 2 * p + 1] = o[1];
        }
    }
}

#else /* AVX2 */
#define KM_Q32G_TT 4
#define KM_Q32G_RP 2
#define KM_Q32G_RPD 2 /* array bound: rows per tile (single rows, not pairs) */
#define KM_Q32G_NACC 8
#ifndef KM_Q32G_PF
#define KM_Q32G_PF 8192
#endif
#define KM_Q32G_PARK (KM_Q32G_NC * KM_Q32G_TT)

/* One activation row's slice: the q8_0 blocks, the seed 0x4B400000 - off * xs4 and fp16(x.d). */
typedef struct {
    __m256i seed8[KM_Q32G_KS];
    float dx[KM_Q32G_KS + 8];
    const km_block_q8_0 *x;
} km_q32g_xrow;

typedef __m256 km_q32g_acc;

KM_ALWAYS_INLINE void km_q32g_prep(km_q32g_xrow *r, const km_block_q8_0 *x, int64_t ks, const int off) {
    const int sh = off == 16 ? 4 : 7;
    r->x = x;
    for (int64_t b = 0; b < ks; b++) {
        if (off > 0) {
            const __m256i v = _mm256_loadu_si256((const __m256i *)x[b].qs);
            const __m256i s = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), v), _mm256_set1_epi16(1));
            r->seed8[b] = _mm256_sub_epi32(_mm256_set1_epi32(KM_Q32G_MAGIC), _mm256_slli_epi32(s, sh));
        }
        r->dx[b] = km_fp16_to_fp32(x[b].d);
    }
    for (int64_t b = ks; b < ((ks + 7) & ~(int64_t)7); b++) r->dx[b] = 0.0f;
}

/* One tile: rows row0 .. row0 + R - 1 (R <= RP) x T activation rows over blocks [0, ks). */
KM_ALWAYS_INLINE void km_q32g_tile(float *y, int64_t ystride, const uint8_t *w, int64_t wrow, int64_t wblk,
                                   const int fmt, const km_q32g_xrow *xr, int64_t ks, int first, int last,
                                   km_q32g_acc *park, const int RP, const int T, int R) {
    __m256 acc[KM_Q32G_NACC];
    const uint8_t *rw[KM_Q32G_RPD];
    for (int r = 0; r < RP; r++) rw[r] = w + (r < R ? r : R - 1) * wrow;
    for (int i = 0; i < RP * T; i++) acc[i] = first ? _mm256_setzero_ps() : park[i];
    float tb[2][KM_Q32G_NACC][8] __attribute__((aligned(32))); /* double buffer, as in the AVX-512 tile */
    const __m256i one = _mm256_set1_epi16(1);
    const __m256 magic = _mm256_set1_ps(12582912.0f);
    for (int64_t g = 0; g < ks + 8; g += 8) {
        const int n = ks - g >= 8 ? 8 : (int)(ks - g);
        if (g < ks) {
            for (int r = 0; r < RP; r++) {
                const __m256 dw = n == 8 ? km_avx2_f16x8_strided(rw[r] + g * wblk, wblk)
                                         : km_avx2_f16x8_strided_n(rw[r] + g * wblk, wblk, n);
                for (int t = 0; t < T; t++)
                    _mm256_store_ps(tb[(g >> 3) & 1][r * T + t], _mm256_mul_ps(dw, _mm256_loadu_ps(xr[t].dx + g)));
            }
        }
        if (g == 0) continue;
        const int64_t gp = g - 8;
        const int np = ks - gp >= 8 ? 8 : (int)(ks - gp);
        const float(*tc)[8] = tb[(gp >> 3) & 1];
        for (int j = 0; j < np; j++) {
            const int64_t b = gp + j;
            __m256i wq[KM_Q32G_RPD], wa[KM_Q32G_RPD];
            for (int r = 0; r < RP; r++) {
                if (fmt == 8) {
                    wq[r] = km_avx2_w_q8_0(rw[r] + b * wblk);
                    wa[r] = _mm256_sign_epi8(wq[r], wq[r]);
                } else {
                    wq[r] = km_avx2_u_q5_0(rw[r] + b * wblk);
                    wa[r] = wq[r];
                }
            }
            for (int t = 0; t < T; t++) {
                const __m256i xv = _mm256_loadu_si256((const __m256i *)xr[t].x[b].qs);
                for (int r = 0; r < RP; r++) {
                    __m256 f;
                    if (fmt == 8) {
                        f = _mm256_cvtepi32_ps(_mm256_madd_epi16(_mm256_maddubs_epi16(wa[r], _mm256_sign_epi8(xv, wq[r])), one));
                    } else {
                        const __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(wq[r], xv), one);
                        f = _mm256_sub_ps(_mm256_castsi256_ps(_mm256_add_epi32(p, xr[t].seed8[b])), magic);
                    }
                    acc[r * T + t] = _mm256_fmadd_ps(_mm256_broadcast_ss(&tc[r * T + t][j]), f, acc[r * T + t]);
                }
            }
        }
    }
    if (!last) {
        for (int i = 0; i < RP * T; i++) park[i] = acc[i];
        return;
    }
    for (int r = 0; r < RP; r++)
        for (int t = 0; t < T; t++)
            if (r < R) y[t * ystride + r] = km_avx2_tree8(acc[r * T + t]);
}
#endif

#if defined(__AVX512F__) && defined(__AVX512BW__)
#define KM_Q32G_U5 km_avx512_u_q5_0
#else
#define KM_Q32G_U5 km_avx2_u_q5_0
#endif

/* Decode (one activation row): KM_Q32G_R1 consecutive weight rows block by block, one ymm accumulator
 * each (lanes in contract order), so R independent fma chains hide the fma latency of one row's chain
 * of nb dependent fmas; t of block j by a lane permute. The rows are adjacent in memory; their block
 * reads form R interleaved forward streams, which needs the software prefetch to go to L2
 * (_MM_HINT_T1): with T0 the interleaved streams ran 2-3x slower from cold memory (measured). */
KM_ALWAYS_INLINE void km_q32g_group1(__m256 *acc, const uint8_t *wr, int64_t wrow, int64_t g, int64_t wblk,
                                     const int fmt, const km_q32g_xrow *xr, const int n, const int R) {
    __m256 tv[KM_Q32G_R1];
    const __m256 dx = _mm256_loadu_ps(xr->dx + g);
    for (int r = 0; r < R; r++) {
        const uint8_t *p = wr + r * wrow + g * wblk;
        tv[r] = _mm256_mul_ps(n == 8 ? km_avx2_f16x8_strided(p, wblk) : km_avx2_f16x8_strided_n(p, wblk, n), dx);
        for (int64_t o = 0; o < n * wblk; o += 64) _mm_prefetch((const char *)(p + KM_Q32G_PF + o), _MM_HINT_T1);
    }
    const __m256 magic = _mm256_set1_ps(12582912.0f);
    for (int j = 0; j < n; j++) {
        const int64_t b = g + j;
        const __m256i xv = _mm256_loadu_si256((const __m256i *)xr->x[b].qs);
        for (int r = 0; r < R; r++) {
            const uint8_t *blk = wr + r * wrow + b * wblk;
            __m256 f;
#if defined(__AVX512VNNI__)
            const __m256i u = fmt == 8 ? km_avx2_u_q8_0(blk) : km_avx512_u_q5_0(blk); /* VNNI implies AVX-512 here */
            f = _mm256_sub_ps(_mm256_castsi256_ps(_mm256_dpbusd_epi32(xr->seed8[b], u, xv)), magic);
#else
            if (fmt == 8) {
                const __m256i wq = km_avx2_w_q8_0(blk);
                f = _mm256_cvtepi32_ps(_mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_abs_epi8(wq), _mm256_sign_epi8(xv, wq)),
                                                         _mm256_set1_epi16(1)));
            } else {
                const __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(KM_Q32G_U5(blk), xv), _mm256_set1_epi16(1));
                f = _mm256_sub_ps(_mm256_castsi256_ps(_mm256_add_epi32(p, xr->seed8[b])), magic);
            }
#endif
            acc[r] = _mm256_fmadd_ps(_mm256_permutevar8x32_ps(tv[r], _mm256_set1_epi32(j)), f, acc[r]);
        }
    }
}

/* R (compile-time, <= KM_Q32G_R1) consecutive weight rows at wr (row stride wrow), one K slice. */
KM_ALWAYS_INLINE void km_q32g_row1(float *y, const uint8_t *wr, int64_t wrow, int64_t wblk, const int fmt,
                                   const km_q32g_xrow *xr, int64_t ks, int first, int last, km_q32g_acc *park,
                                   const int R) {
    __m256 acc[KM_Q32G_R1];
    for (int r = 0; r < R; r++) acc[r] = first ? _mm256_setzero_ps() : _mm256_loadu_ps((const float *)(park + r));
    int64_t g = 0;
    for (; g + 8 <= ks; g += 8) km_q32g_group1(acc, wr, wrow, g, wblk, fmt, xr, 8, R);
    switch (ks - g) { /* the tail, with its block count a compile-time constant */
    case 0: break;
    case 1: km_q32g_group1(acc, wr, wrow, g, wblk, fmt, xr, 1, R); break;
    case 2: km_q32g_group1(acc, wr, wrow, g, wblk, fmt, xr, 2, R); break;
    case 3: km_q32g_group1(acc, wr, wrow, g, wblk, fmt, xr, 3, R); break;
    case 4: km_q32g_group1(acc, wr, wrow, g, wblk, fmt, xr, 4, R); break;
    case 5: km_q32g_group1(acc, wr, wrow, g, wblk, fmt, xr, 5, R); break;
    case 6: km_q32g_group1(acc, wr, wrow, g, wblk, fmt, xr, 6, R); break;
    default: km_q32g_group1(acc, wr, wrow, g, wblk, fmt, xr, 7, R); break;
    }
    for (int r = 0; r < R; r++) {
        if (last) y[r] = km_avx2_tree8(acc[r]);
        else _mm256_storeu_ps((float *)(park + r), acc[r]);
    }
}

/* Outputs per tile column step: AVX-512 tiles hold row pairs, AVX2 tiles single rows. */
#if defined(__AVX512F__) && defined(__AVX512BW__)
#define KM_Q32G_ROWS(rp) (2 * (rp))
#else
#define KM_Q32G_ROWS(rp) (rp)
#endif

/* Columns [c0, c1) for T activation rows (re-laid in xr), one K slice; park holds one accumulator
 * set per tile of the chunk when the row has several slices. */
KM_ALWAYS_INLINE void km_q32g_cols(float *y, int64_t N, const uint8_t *w, int64_t wrow, int64_t wblk, const int fmt,
                                   const km_q32g_xrow *xr, int64_t ks, int first, int last, km_q32g_acc *park,
                                   int64_t c0, int64_t c1, const int T) {
    const int RP = KM_Q32G_RP;
    const int full = KM_Q32G_ROWS(RP), one = KM_Q32G_ROWS(1);
    int64_t n = c0, i = 0;
    if (T == 1) {
        for (; n + KM_Q32G_R1 <= c1; n += KM_Q32G_R1, i += KM_Q32G_R1)
            km_q32g_row1(y + n, w + n * wrow, wrow, wblk, fmt, xr, ks, first, last, park + i, KM_Q32G_R1);
        for (; n < c1; n++, i++) km_q32g_row1(y + n, w + n * wrow, wrow, wblk, fmt, xr, ks, first, last, park + i, 1);
        return;
    }
    for (; n + full <= c1; n += full, i += RP * T)
        km_q32g_tile(y + n, N, w + n * wrow, wrow, wblk, fmt, xr, ks, first, last, park + i, RP, T, full);
    for (; n < c1; n += one, i += T) {
        const int r = c1 - n >= one ? one : (int)(c1 - n);
        km_q32g_tile(y + n, N, w + n * wrow, wrow, wblk, fmt, xr, ks, first, last, park + i, 1, T, r);
    }
}

/* The whole linear.token_major.v1 call. fmt 5 = q5_0 (22-byte blocks, offset 16), 8 = q8_0 (34 bytes;
 * offset 128 with VNNI, none otherwise). */
static inline void km_q32g_linear(float *y, const void *w, const void *x, int64_t M, int64_t N, int64_t K, int ith,
                                  int nth, const int fmt) {
    const int64_t nb = K / KM_QK8_0;
    const int64_t wblk = fmt == 8 ? 34 : 22;
#if defined(__AVX512VNNI__)
    const int off = fmt == 8 ? 128 : 16;
#else
    const int off = fmt == 8 ? 0 : 16;
#endif
    int64_t lo, hi;
    km_part(N, ith, nth, &lo, &hi);
    const int64_t wrow = nb * wblk;
    const uint8_t *wb = (const uint8_t *)w;
    const km_block_q8_0 *xb = (const km_block_q8_0 *)x;
    km_q32g_xrow xr[KM_Q32G_TT]; /* stack: ~175 KB (AVX-512), ~17 KB (AVX2) */
    km_q32g_acc park[KM_Q32G_PARK]; /* stack: 64 KB (AVX-512), 16 KB (AVX2); used when nb > KM_Q32G_KS */
    for (int64_t c0 = lo; c0 < hi; c0 += KM_Q32G_NC) {
        const int64_t c1 = hi - c0 > KM_Q32G_NC ? c0 + KM_Q32G_NC : hi;
        for (int64_t m0 = 0; m0 < M; ) {
            const int64_t left = M - m0;
            const int T = left >= KM_Q32G_TT ? KM_Q32G_TT : left >= 8 ? 8 : left >= 4 ? 4 : left >= 2 ? 2 : 1;
            for (int64_t k0 = 0; k0 < nb; k0 += KM_Q32G_KS) {
                const int64_t ks = nb - k0 > KM_Q32G_KS ? KM_Q32G_KS : nb - k0;
                for (int t = 0; t < T; t++) km_q32g_prep(&xr[t], xb + (m0 + t) * nb + k0, ks, off);
                const int first = k0 == 0, last = k0 + ks == nb;
                float *ym = y + m0 * N;
                const uint8_t *wk = wb + k0 * wblk;
                switch (T) {
#if KM_Q32G_TT == 16
                case 16: km_q32g_cols(ym, N, wk, wrow, wblk, fmt, xr, ks, first, last, park, c0, c1, 16); break;
#endif
#if KM_Q32G_TT >= 8
                case 8: km_q32g_cols(ym, N, wk, wrow, wblk, fmt, xr, ks, first, last, park, c0, c1, 8); break;
#endif
                case 4: km_q32g_cols(ym, N, wk, wrow, wblk, fmt, xr, ks, first, last, park, c0, c1, 4); break;
                case 2: km_q32g_cols(ym, N, wk, wrow, wblk, fmt, xr, ks, first, last, park, c0, c1, 2); break;
                default: km_q32g_cols(ym, N, wk, wrow, wblk, fmt, xr, ks, first, last, park, c0, c1, 1); break;
                }
            }
            m0 += T;
        }
    }
}

#endif /* KM_Q32_GGML_H */
