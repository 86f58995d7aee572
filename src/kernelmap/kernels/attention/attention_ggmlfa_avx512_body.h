/* attention/attention_ggmlfa_avx512_body.h — the AVX-512 steps of llama.cpp's one-row flash attention, shared
 * by ggmlfa_avx512.c (contract attention.f16kv.ggml_fa.v1) and ggmlfa_split_avx512.c (attention.f16kv.ggml_fa_split<N>.v1).
 *
 * Holds the score fold, the 16-lane expf, the online-softmax scalars, the VKQ column chunks and run_keys (keys
 * js .. je of a group of up to 8 items into an unnormalized state), plus the group helpers: Q16 of the items,
 * a fresh state, a row pair's keys clipped to a key range, the normalized store, and the walk over a thread's
 * items in groups. ggmlfa_avx512.c's contract
 * comment describes the schedule and why every element sees the contract's roundings. Compile with
 * -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx2 -mfma -mf16c.
 */
#ifndef KM_ATTENTION_GGMLFA_AVX512_BODY_H
#define KM_ATTENTION_GGMLFA_AVX512_BODY_H

#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "km_common.h"
#include "attention_ggmlfa_part.h"
#include "attention_ggmlfa_softmax.h"

#define KM_FA_DMAX 512
#define KM_FA_KB 32 /* keys per block */
#define KM_FA_KBF 16 /* keys per block, fused schedule */
#define KM_FA_G 8   /* max items per group */
#define KM_RNE (_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
#define KM_AI static inline __attribute__((always_inline))

KM_AI __m512 ld16(const km_half *p) { return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)p)); }

KM_AI __m512 rt16(__m512 x) { return _mm512_cvtph_ps(_mm512_cvtps_ph(x, KM_RNE)); }

/* P = (A0 + A2) + (A1 + A3): the first step of the contract's fold, 16 lanes. */
KM_AI __m512 fold4(__m512 a0, __m512 a1, __m512 a2, __m512 a3) {
    return _mm512_add_ps(_mm512_add_ps(a0, a2), _mm512_add_ps(a1, a3));
}

/* The rest of the fold for 16 keys at once: P[l] += P[l+8], P[l] += P[l+4], P[l] += P[l+2],
 * s = P[0] + P[1], each step one add over lanes of several keys gathered by shuffles (the adds are
 * the contract's, two operands each, so the bits are the same as a per-key reduction). p[k] holds
 * the 16 lanes of key k; the 16 sums go to s[0..15] in key order. */
KM_AI void fold16(float *s, const float *p) {
    __m512 q1[8], q2[4], q3[2];
    for (int i = 0; i < 8; i++) {
        const __m512 a = _mm512_load_ps(p + 32 * i), b = _mm512_load_ps(p + 32 * i + 16);
        /* lanes 0-7: key 2i's P[l] + P[l+8]; lanes 8-15: key 2i+1's */
        q1[i] = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(1, 0, 1, 0)),
                              _mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(3, 2, 3, 2)));
    }
    for (int i = 0; i < 4; i++) {
        /* 128-bit block b: key 4i+b's h[l] + h[l+4], l < 4 */
        q2[i] = _mm512_add_ps(_mm512_shuffle_f32x4(q1[2 * i], q1[2 * i + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                              _mm512_shuffle_f32x4(q1[2 * i], q1[2 * i + 1], _MM_SHUFFLE(3, 1, 3, 1)));
    }
    for (int i = 0; i < 2; i++) {
        /* block b: [u0 + u2, u1 + u3] of key 8i+b, then of key 8i+4+b */
        q3[i] = _mm512_add_ps(_mm512_shuffle_ps(q2[2 * i], q2[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                              _mm512_shuffle_ps(q2[2 * i], q2[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    }
    /* block b: v0 + v1 of keys b, 4+b, 8+b, 12+b */
    const __m512 r = _mm512_add_ps(_mm512_shuffle_ps(q3[0], q3[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                   _mm512_shuffle_ps(q3[0], q3[1], _MM_SHUFFLE(3, 1, 3, 1)));
    const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    _mm512_store_ps(s, _mm512_permutexvar_ps(order, r));
}

/* Scores s[g*KB + k] of keys k < nk (rows kr + k*D) against the G widened Q16 rows qf + g*D. */
KM_AI void scores4(float *s, const km_half *kr, int64_t nk, const float *qf, int64_t D, const int G) {
    float pb[4 * KM_FA_KB * 16] __attribute__((aligned(64))); /* [G][KB][16] P lanes */
    const int64_t d64 = D & ~(int64_t)63;
    for (int64_t k = 0; k < nk; k++) {
        const km_half *kk = kr + k * D;
        __m512 a[4][4];
        for (int g = 0; g < G; g++) {
            for (int i = 0; i < 4; i++) a[g][i] = _mm512_setzero_ps();
        }
        for (int64_t c = 0; c < d64; c += 64) {
            __m512 x[4];
            for (int i = 0; i < 4; i++) x[i] = ld16(kk + c + 16 * i);
            for (int g = 0; g < G; g++) {
                for (int i = 0; i < 4; i++) {
                    a[g][i] = _mm512_fmadd_ps(x[i], _mm512_load_ps(qf + g * D + c + 16 * i), a[g][i]);
                }
            }
        }
        for (int g = 0; g < G; g++) _mm512_store_ps(pb + (g * KM_FA_KB + k) * 16, fold4(a[g][0], a[g][1], a[g][2], a[g][3]));
    }
    for (int g = 0; g < G; g++) {
        for (int64_t k = 0; k < nk; k += 16) fold16(s + g * KM_FA_KB + k, pb + (g * KM_FA_KB + k) * 16);
    }
    if (d64 < D) {
        for (int g = 0; g < G; g++) {
            for (int64_t k = 0; k < nk; k++) {
                const km_half *kk = kr + k * D;
                double res = (double)s[g * KM_FA_KB + k];
                for (int64_t i = d64; i < D; i++) res += (double)(km_fp16_to_fp32(kk[i]) * qf[g * D + i]);
                s[g * KM_FA_KB + k] = (float)res;
            }
        }
    }
}

/* Scores of up to 8 heads: in parts of at most 4 (the accumulators of 4 heads fill the registers). */
KM_AI void scores(float *s, const km_half *kr, int64_t nk, const float *qf, int64_t D, const int G) {
    if (G <= 4) {
        scores4(s, kr, nk, qf, D, G);
    } else {
        scores4(s, kr, nk, qf, D, 4);
        scores4(s + 4 * KM_FA_KB, kr, nk, qf + 4 * D, D, G - 4);
    }
}

/* ---- expf on 16 lanes, bit-identical to the C library's expf (glibc >= 2.27, FMA build) ----
 * glibc's expf: xd = (double)x; kd = fma(xd, 32/ln2, 0x1.8p52) (its bits ki carry k = round(32x/ln2));
 * kd -= 0x1.8p52; r = fma(32/ln2, xd, -kd); s = asdouble(T[k mod 32] + (ki << 47)) with
 * T[i] = bits(2^(i/32), correctly rounded) - (i << 47); y = fma(fma(r, C0, C1), r*r, fma(r, C2, 1)) * s;
 * return (float)y; inputs with |x| >= 0x1.6p6 (top 12 bits >= 0x42b: large, inf, NaN) take its special
 * path: those lanes call expf itself. The vector code does the same double operations (8 lanes per zmm,
 * the table by two permutes). A one-time self-check against expf on 4096 inputs guards the process
 * (any difference: every call uses expf); the test suite checks all 2^32 inputs (marked slow) and a
 * sample of ranges by default (km_ggmlfa_avx512_expf_check). */
static const uint64_t km_fa_exp_tab[32] __attribute__((aligned(64))) = {
    0x3ff0000000000000ULL, 0x3fefd9b0d3158574ULL, 0x3fefb5586cf9890fULL, 0x3fef9301d0125b51ULL,
    0x3fef72b83c7d517bULL, 0x3fef54873168b9aaULL, 0x3fef387a6e756238ULL, 0x3fef1e9df51fdee1ULL,
    0x3fef06fe0a31b715ULL, 0x3feef1a7373aa9cbULL, 0x3feedea64c123422ULL, 0x3feece086061892dULL,
    0x3feebfdad5362a27ULL, 0x3feeb42b569d4f82ULL, 0x3feeab07dd485429ULL, 0x3feea47eb03a5585ULL,
    0x3feea09e667f3bcdULL, 0x3fee9f75e8ec5f74ULL, 0x3feea11473eb0187ULL, 0x3feea589994cce13ULL,
    0x3feeace5422aa0dbULL, 0x3feeb737b0cdc5e5ULL, 0x3feec49182a3f090ULL, 0x3feed503b23e255dULL,
    0x3feee89f995ad3adULL, 0x3feeff76f2fb5e47ULL, 0x3fef199bdd85529cULL, 0x3fef3720dcef9069ULL,
    0x3fef5818dcfba487ULL, 0x3fef7c97337b9b5fULL, 0x3fefa4afa2a490daULL, 0x3fefd0765b6e4540ULL,
};

KM_AI __m256 vexp8(__m256 x) {
    const __m512d inv_ln2_n = _mm512_set1_pd(0x1.71547652b82fep+5), shift = _mm512_set1_pd(0x1.8p+52);
    const __m512d xd = _mm512_cvtps_pd(x);
    __m512d kd = _mm512_fmadd_pd(inv_ln2_n, xd, shift);
    const __m512i ki = _mm512_castpd_si512(kd);
    kd = _mm512_sub_pd(kd, shift);
    const __m512d r = _mm512_fmsub_pd(inv_ln2_n, xd, kd);
    const __m512i t01 = _mm512_permutex2var_epi64(_mm512_load_si512(km_fa_exp_tab), ki, _mm512_load_si512(km_fa_exp_tab + 8));
    const __m512i t23 = _mm512_permutex2var_epi64(_mm512_load_si512(km_fa_exp_tab + 16), ki, _mm512_load_si512(km_fa_exp_tab + 24));
    __m512i t = _mm512_mask_blend_epi64(_mm512_test_epi64_mask(ki, _mm512_set1_epi64(16)), t01, t23);
    t = _mm512_add_epi64(t, _mm512_slli_epi64(ki, 47));
    const __m512d z = _mm512_fmadd_pd(r, _mm512_set1_pd(0x1.c6af84b912394p-20), _mm512_set1_pd(0x1.ebfce50fac4f3p-13));
    const __m512d r2 = _mm512_mul_pd(r, r);
    __m512d y = _mm512_fmadd_pd(r, _mm512_set1_pd(0x1.62e42ff0c52d6p-6), _mm512_set1_pd(1.0));
    y = _mm512_fmadd_pd(z, r2, y);
    y = _mm512_mul_pd(y, _mm512_castsi512_pd(t));
    return _mm512_cvtpd_ps(y);
}

/* expf of 16 lanes: vector path, lanes outside glibc's main range through expf itself */
static inline __m512 vexp16(__m512 x) {
    const __m256 lo = vexp8(_mm512_castps512_ps256(x));
    const __m256 hi = vexp8(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(x), 1)));
    __m512 y = _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castps_pd(_mm512_castps256_ps512(lo)), _mm256_castps_pd(hi), 1));
    const __mmask16 special = _mm512_cmpge_epu32_mask(_mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(0x7fffffff)),
                                                      _mm512_set1_epi32(0x42b00000));
    if (__builtin_expect(special != 0, 0)) {
        float xs[16], ys[16];
        _mm512_storeu_ps(xs, x);
        _mm512_storeu_ps(ys, y);
        for (int l = 0; l < 16; l++) {
            if (special >> l & 1) ys[l] = expf(xs[l]);
        }
        y = _mm512_loadu_ps(ys);
    }
    return y;
}

static int km_fa_vexp_state; /* 0 not checked yet, 1 vexp16 == expf on the sample, 2 use expf */

static int vexp_usable(void) {
    int st = __atomic_load_n(&km_fa_vexp_state, __ATOMIC_RELAXED);
    if (st == 0) {
        st = 1;
        uint32_t b = 0x9e3779b9u;
        for (int i = 0; i < 4096 && st == 1; i += 16) {
            float xs[16];
            for (int l = 0; l < 16; l++) {
                b = b * 1664525u + 1013904223u;
                /* alternately any bits and negative values of magnitude below 104 */
                uint32_t u = (l & 1) ? b : 0x80000000u | (b % 0x42d00000u);
                memcpy(&xs[l], &u, 4);
            }
            float ys[16];
            _mm512_storeu_ps(ys, vexp16(_mm512_loadu_ps(xs)));
            for (int l = 0; l < 16; l++) {
                const float e = expf(xs[l]);
                if (memcmp(&e, &ys[l], 4) != 0) st = 2;
            }
        }
        __atomic_store_n(&km_fa_vexp_state, st, __ATOMIC_RELAXED);
    }
    return st == 1;
}

/* The online-softmax scalars of keys k < nk for one head, 16 keys per step: the running maximum
 * before each key is a prefix maximum (a key replaces it only when strictly greater, NaN never), so
 * it is scanned in lanes; then newmax = s > Mprev, e = expf(newmax ? Mprev - s : s - Mprev),
 * ms = newmax ? e : 1, vs = newmax ? 1 : e (the contract's values, key by key), and S = fma(S, ms, vs)
 * in key order. */
static inline void softmax_block(const float *sc, float *ms, float *vs, uint8_t *nmask, int g, int64_t nk,
        float *big_m, float *big_s) {
    const __m512 ninf = _mm512_set1_ps(-INFINITY), one = _mm512_set1_ps(1.0f);
    const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    __m512 mcur = _mm512_set1_ps(*big_m);
    for (int64_t k0 = 0; k0 < nk; k0 += 16) {
        const __mmask16 valid = (__mmask16)(nk - k0 >= 16 ? 0xffff : (1u << (nk - k0)) - 1u);
        const __m512 s = _mm512_load_ps(sc + k0);
        /* candidates: valid, non-NaN scores; others -inf (never strictly greater) */
        __m512 pm = _mm512_mask_blend_ps(valid & _mm512_cmp_ps_mask(s, s, _CMP_ORD_Q), ninf, s);
        for (int sh = 1; sh < 16; sh <<= 1) {
            /* earlier = pm shifted up by sh lanes (-inf in) ; keep the earlier unless pm is greater */
            const __m512 earlier = _mm512_mask_permutexvar_ps(ninf, (__mmask16)(0xffffu << sh),
                                                              _mm512_sub_epi32(lane, _mm512_set1_epi32(sh)), pm);
            pm = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(pm, earlier, _CMP_GT_OQ), earlier, pm);
        }
        /* exclusive prefix, combined with the maximum before this step */
        __m512 mprev = _mm512_mask_permutexvar_ps(ninf, 0xfffe, _mm512_sub_epi32(lane, _mm512_set1_epi32(1)), pm);
        mprev = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(mprev, mcur, _CMP_GT_OQ), mcur, mprev);
        const __mmask16 nm = valid & _mm512_cmp_ps_mask(s, mprev, _CMP_GT_OQ);
        const __m512 arg = _mm512_maskz_mov_ps(valid, _mm512_mask_blend_ps(nm, _mm512_sub_ps(s, mprev), _mm512_sub_ps(mprev, s)));
        const __m512 e = vexp16(arg);
        _mm512_store_ps(ms + k0, _mm512_mask_blend_ps(nm, one, e));
        _mm512_store_ps(vs + k0, _mm512_mask_blend_ps(nm, e, one));
        for (int l = 0; l < 16 && k0 + l < nk; l++) nmask[k0 + l] |= (uint8_t)((nm >> l & 1u) << g);
        /* the maximum after this step: last lane of the inclusive scan, combined with mcur */
        const __m512 last = _mm512_permutexvar_ps(_mm512_set1_epi32(15), pm);
        mcur = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(last, mcur, _CMP_GT_OQ), mcur, last);
    }
    float ss = *big_s;
    for (int64_t k = 0; k < nk; k++) ss = fmaf(ss, ms[k], vs[k]);
    *big_s = ss;
    *big_m = _mm512_cvtss_f32(mcur);
}

/* VKQ columns d0 .. d0+16*NV-1 of the G heads (f32 copies of f16 values in acc + g*D) through keys
 * k < nk of the block: optional rescale by ms (bit g of nmask[k]), then the V_k mad with vs. */
KM_AI void vchunk(float *acc, int64_t D, int64_t d0, const km_half *vr, int64_t nk, const float *vs,
        const float *ms, const uint8_t *nmask, const int G, const int NV) {
    __m512 a[KM_FA_G][4];
    for (int g = 0; g < G; g++) {
        for (int v = 0; v < NV; v++) a[g][v] = _mm512_load_ps(acc + g * D + d0 + 16 * v);
    }
    for (int64_t k = 0; k < nk; k++) {
        __m512 x[4];
        for (int v = 0; v < NV; v++) x[v] = ld16(vr + k * D + d0 + 16 * v);
        const unsigned nm = nmask[k];
        if (__builtin_expect(nm != 0, 0)) {
            for (int g = 0; g < G; g++) {
                if (nm >> g & 1u) {
                    const __m512 b = _mm512_set1_ps(ms[g * KM_FA_KB + k]);
                    for (int v = 0; v < NV; v++) a[g][v] = rt16(_mm512_mul_ps(a[g][v], b));
                }
            }
        }
        for (int g = 0; g < G; g++) {
            const __m512 b = _mm512_set1_ps(vs[g * KM_FA_KB + k]);
            for (int v = 0; v < NV; v++) a[g][v] = rt16(_mm512_fmadd_ps(x[v], b, a[g][v]));
        }
    }
    for (int g = 0; g < G; g++) {
        for (int v = 0; v < NV; v++) _mm512_store_ps(acc + g * D + d0 + 16 * v, a[g][v]);
    }
}

KM_AI void vblock(float *acc, int64_t D, const km_half *vr, int64_t nk, const float *vs, const float *ms,
        const uint8_t *nmask, const int G) {
    if (G > 4) { /* 8 heads x 2 vectors of accumulators */
        const int64_t d32 = D & ~(int64_t)31;
        for (int64_t d0 = 0; d0 < d32; d0 += 32) vchunk(acc, D, d0, vr, nk, vs, ms, nmask, G, 2);
        for (int64_t d0 = d32; d0 < D; d0 += 16) vchunk(acc, D, d0, vr, nk, vs, ms, nmask, G, 1);
        return;
    }
    const int64_t d64 = D & ~(int64_t)63;
    for (int64_t d0 = 0; d0 < d64; d0 += 64) vchunk(acc, D, d0, vr, nk, vs, ms, nmask, G, 4);
    for (int64_t d0 = d64; d0 < D; d0 += 16) vchunk(acc, D, d0, vr, nk, vs, ms, nmask, G, 1);
}

/* vchunk (NV = 4 or 2) that also computes, one per key k < nk2, the score P lanes of the NEXT block's key k
 * for one head: the dot of the widened K row kf + k*D with qg (partial i mod 64 in increasing i, as in
 * scores()), first fold step, to pk + k*16. The score FMAs run on the FMA pipes while the VKQ chain
 * waits on the f16 conversions, so the next block's scores cost little. */
KM_AI void vchunk_dot(float *acc, int64_t D, int64_t d0, const km_half *vr, int64_t nk, const float *vs,
        const float *ms, const uint8_t *nmask, const float *kf, int64_t nk2, const float *qg, float *pk, const int G,
        const int NV) {
    __m512 a[KM_FA_G][4];
    for (int g = 0; g < G; g++) {
        for (int v = 0; v < NV; v++) a[g][v] = _mm512_load_ps(acc + g * D + d0 + 16 * v);
    }
    for (int64_t k = 0; k < nk; k++) {
        __m512 x[4];
        for (int v = 0; v < NV; v++) x[v] = ld16(vr + k * D + d0 + 16 * v);
        const unsigned nm = nmask[k];
        if (__builtin_expect(nm != 0, 0)) {
            for (int g = 0; g < G; g++) {
                if (nm >> g & 1u) {
                    const __m512 b = _mm512_set1_ps(ms[g * KM_FA_KB + k]);
                    for (int v = 0; v < NV; v++) a[g][v] = rt16(_mm512_mul_ps(a[g][v], b));
                }
            }
        }
        for (int g = 0; g < G; g++) {
            const __m512 b = _mm512_set1_ps(vs[g * KM_FA_KB + k]);
            for (int v = 0; v < NV; v++) a[g][v] = rt16(_mm512_fmadd_ps(x[v], b, a[g][v]));
        }
        if (k < nk2) {
            const float *kk = kf + k * D;
            __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps(), s2 = _mm512_setzero_ps(), s3 = _mm512_setzero_ps();
            for (int64_t c = 0; c < D; c += 64) {
                s0 = _mm512_fmadd_ps(_mm512_load_ps(kk + c), _mm512_load_ps(qg + c), s0);
                s1 = _mm512_fmadd_ps(_mm512_load_ps(kk + c + 16), _mm512_load_ps(qg + c + 16), s1);
                s2 = _mm512_fmadd_ps(_mm512_load_ps(kk + c + 32), _mm512_load_ps(qg + c + 32), s2);
                s3 = _mm512_fmadd_ps(_mm512_load_ps(kk + c + 48), _mm512_load_ps(qg + c + 48), s3);
            }
            _mm512_store_ps(pk + k * 16, fold4(s0, s1, s2, s3));
        }
    }
    for (int g = 0; g < G; g++) {
        for (int v = 0; v < NV; v++) _mm512_store_ps(acc + g * D + d0 + 16 * v, a[g][v]);
    }
}

/* vblock for D a multiple of W = 16*NV with D/W >= G (NV = 4 for up to 4 heads, 2 for more): column
 * chunk c also computes head c's scores of the next block (nk2 keys, widened K rows in kf) into pb
 * [G][KB][16]. */
KM_AI void vblock_fused(float *acc, int64_t D, const km_half *vr, int64_t nk, const float *vs, const float *ms,
        const uint8_t *nmask, const float *kf, int64_t nk2, const float *qf, float *pb, const int G) {
    const int NV = G > 4 ? 2 : 4;
    for (int64_t c = 0; c < D / (16 * NV); c++) {
        if (c < G && nk2 > 0) {
            vchunk_dot(acc, D, 16 * NV * c, vr, nk, vs, ms, nmask, kf, nk2, qf + c * D, pb + c * KM_FA_KB * 16, G, NV);
        } else {
            vchunk(acc, D, 16 * NV * c, vr, nk, vs, ms, nmask, G, NV);
        }
    }
}

/* The state of a group of up to 8 items (query rows x heads that read one KV head). */
typedef struct {
    float qf[KM_FA_G * KM_FA_DMAX] __attribute__((aligned(64)));  /* [G][D] f32(Q16) */
    float acc[KM_FA_G * KM_FA_DMAX] __attribute__((aligned(64))); /* [G][D] f32(VKQ) */
    float big_m[KM_FA_G], big_s[KM_FA_G];
} km_fa_state;

/* Keys js .. je (increasing) for the G items whose state starts at item g0 of st. */
KM_AI void run_keys(km_fa_state *st, int g0, const km_half *kb, const km_half *vb, int64_t D, int64_t js, int64_t je,
        int use_vexp, const int G) {
    float sc[KM_FA_G * KM_FA_KB] __attribute__((aligned(64)));       /* [G][KB] scores */
    float vs[KM_FA_G * KM_FA_KB] __attribute__((aligned(64)));       /* [G][KB] */
    float ms[KM_FA_G * KM_FA_KB] __attribute__((aligned(64)));       /* [G][KB] */
    float kf[KM_FA_KBF * KM_FA_DMAX] __attribute__((aligned(64)));   /* [KBF][D] widened K rows (fused) */
    float pb[KM_FA_G * KM_FA_KB * 16] __attribute__((aligned(64)));  /* [G][KB][16] score lanes (fused) */
    uint8_t nmask[KM_FA_KB];
    float *qf = st->qf + g0 * D, *acc = st->acc + g0 * D, *big_m = st->big_m + g0, *big_s = st->big_s + g0;
    /* fused: blocks of 16 keys, the next block's scores computed inside this block's VKQ pass */
    const int64_t fw = G > 4 ? 32 : 64; /* fused column chunk */
    const int fused = D % fw == 0 && D / fw >= G;
    const int64_t step = fused ? KM_FA_KBF : KM_FA_KB;
    if (fused && js <= je) scores(sc, kb + js * D, je + 1 - js < step ? je + 1 - js : step, qf, D, G);
    for (int64_t jb = js; jb <= je; jb += step) {
        const int64_t nk = je + 1 - jb < step ? je + 1 - jb : step;
        if (!fused) scores(sc, kb + jb * D, nk, qf, D, G);
        for (int64_t k = 0; k < nk; k++) nmask[k] = 0;
        for (int g = 0; g < G; g++) {
            float *msg = ms + g * KM_FA_KB, *vsg = vs + g * KM_FA_KB;
            if (use_vexp) {
                softmax_block(sc + g * KM_FA_KB, msg, vsg, nmask, g, nk, &big_m[g], &big_s[g]);
            } else {
                km_fa_softmax_libm(sc + g * KM_FA_KB, msg, vsg, nmask, g, nk, &big_m[g], &big_s[g]);
            }
        }
        if (!fused) {
            vblock(acc, D, vb + jb * D, nk, vs, ms, nmask, G);
            continue;
        }
        const int64_t jn = jb + step;
        const int64_t nk2 = jn > je ? 0 : (je + 1 - jn < step ? je + 1 - jn : step);
        for (int64_t k = 0; k < nk2; k++) {
            for (int64_t d = 0; d < D; d += 16) _mm512_store_ps(kf + k * D + d, ld16(kb + (jn + k) * D + d));
        }
        vblock_fused(acc, D, vb + jb * D, nk, vs, ms, nmask, kf, nk2, qf, pb, G);
        for (int g = 0; g < G; g++) {
            for (int64_t k = 0; k < nk2; k += 16) fold16(sc + g * KM_FA_KB + k, pb + (g * KM_FA_KB + k) * 16);
        }
    }
}

#define KM_FA_RUN(n) \
    static void run_keys##n(km_fa_state *st, int g0, const km_half *kb, const km_half *vb, int64_t D, int64_t js, \
            int64_t je, int use_vexp) { \
        run_keys(st, g0, kb, vb, D, js, je, use_vexp, n); \
    }
KM_FA_RUN(1)
KM_FA_RUN(2)
KM_FA_RUN(3)
KM_FA_RUN(4)
KM_FA_RUN(5)
KM_FA_RUN(6)
KM_FA_RUN(7)
KM_FA_RUN(8)

static void run_keys_n(km_fa_state *st, int g0, int n, const km_half *kb, const km_half *vb, int64_t D, int64_t js,
        int64_t je, int use_vexp) {
    switch (n) {
    case 1: run_keys1(st, g0, kb, vb, D, js, je, use_vexp); break;
    case 2: run_keys2(st, g0, kb, vb, D, js, je, use_vexp); break;
    case 3: run_keys3(st, g0, kb, vb, D, js, je, use_vexp); break;
    case 4: run_keys4(st, g0, kb, vb, D, js, je, use_vexp); break;
    case 5: run_keys5(st, g0, kb, vb, D, js, je, use_vexp); break;
    case 6: run_keys6(st, g0, kb, vb, D, js, je, use_vexp); break;
    case 7: run_keys7(st, g0, kb, vb, D, js, je, use_vexp); break;
    default: run_keys8(st, g0, kb, vb, D, js, je, use_vexp); break;
    }
}

/* Q16 of the G items its[g] (rows q + its[g]*D), widened to f32 into st->qf */
static inline void group_q(km_fa_state *st, const float *q, const int64_t *its, int G, int64_t D, float scale) {
    const __m512 vscale = _mm512_set1_ps(scale);
    for (int g = 0; g < G; g++) {
        const float *qr = q + its[g] * D;
        for (int64_t d = 0; d < D; d += 16) {
            _mm512_store_ps(st->qf + g * D + d, rt16(_mm512_mul_ps(_mm512_loadu_ps(qr + d), vscale)));
        }
    }
}

/* a fresh online-softmax state for G items: VKQ = 0, M = -inf, S = 0 */
static inline void group_reset(km_fa_state *st, int G, int64_t D) {
    for (int g = 0; g < G; g++) {
        for (int64_t d = 0; d < D; d += 16) _mm512_store_ps(st->acc + g * D + d, _mm512_setzero_ps());
        st->big_m[g] = -INFINITY;
        st->big_s[g] = 0.0f;
    }
}

/* The keys of n heads of row m (position p, window start from `window`) and, when rows == 2, of the same
 * heads of row m+1 (items n .. 2n-1 of st), only those in lo .. hi. Row m+1 sees keys j1 .. p+1 with
 * j1 in {j0, j0+1}. In key order: keys only row m sees (j0 .. j1-1), the common keys j1 .. p for all 2n
 * items, then key p+1 for row m+1: every item still visits exactly its own keys in increasing j. */
static inline void group_keys(km_fa_state *st, int n, int rows, const km_half *kb, const km_half *vb, int64_t D,
        int64_t p, int64_t window, int64_t lo, int64_t hi, int use_vexp) {
    const int64_t j0 = (window > 0 && p - window + 1 > 0) ? p - window + 1 : 0;
#define KM_FA_CLIP(a, b) ((a) > lo ? (a) : lo), ((b) < hi ? (b) : hi)
    if (rows == 1) {
        run_keys_n(st, 0, n, kb, vb, D, KM_FA_CLIP(j0, p), use_vexp);
    } else {
        const int64_t j1 = (window > 0 && p + 1 - window + 1 > 0) ? p + 1 - window + 1 : 0;
        run_keys_n(st, 0, n, kb, vb, D, KM_FA_CLIP(j0, j1 - 1), use_vexp);
        run_keys_n(st, 0, 2 * n, kb, vb, D, KM_FA_CLIP(j1, p), use_vexp);
        run_keys_n(st, n, n, kb, vb, D, KM_FA_CLIP(p + 1, p + 1), use_vexp);
    }
#undef KM_FA_CLIP
}

/* y rows its[g] = f32(VKQ) * (S == 0 ? 0 : 1/S) of the G items */
static inline void group_store(const km_fa_state *st, float *y, const int64_t *its, int G, int64_t D) {
    for (int g = 0; g < G; g++) {
        const __m512 vi = _mm512_set1_ps(st->big_s[g] == 0.0f ? 0.0f : 1.0f / st->big_s[g]);
        float *yr = y + its[g] * D;
        for (int64_t d = 0; d < D; d += 16) _mm512_storeu_ps(yr + d, _mm512_mul_ps(_mm512_load_ps(st->acc + g * D + d), vi));
    }
}

/* What a group needs besides its items: the op's buffers and scalars (n_split: the split contract's N). */
typedef struct {
    float *y;
    const float *q;
    const km_half *kc, *vc; /* [Hkv][C][D] */
    int64_t D, C, pos, window, n_split;
    float scale;
} km_fa_args;

/* Runs items its[0 .. n*rows) (n heads of row m reading KV head kvh; rows == 2: the same heads of m+1 too). */
typedef void (*km_fa_group_fn)(const km_fa_args *a, const int64_t *its, int n, int rows, int64_t kvh, int64_t m);

/* Thread ith's items (attention_ggmlfa_part.h) in groups: two whole rows in range go in pairs of head groups
 * (K and V rows widened once for up to 8 items) when pair_ok(p) for the first row's position p (NULL: always);
 * otherwise heads of one row, at most 4 per group, all reading one KV head. */
static inline void km_fa_walk(const km_fa_args *a, int64_t M, int64_t Hq, int64_t Hkv, int ith, int nth,
        int (*pair_ok)(int64_t), km_fa_group_fn run) {
    const int64_t group = Hq / Hkv;
    int64_t lo, hi;
    km_fa_part(M, Hq, a->pos, a->window, ith, nth, &lo, &hi);
    for (int64_t it = lo; it < hi;) {
        const int64_t m = it / Hq, h = it % Hq;
        const int rows = (h == 0 && it + 2 * Hq <= hi && (pair_ok == NULL || pair_ok(a->pos + m))) ? 2 : 1;
        const int64_t end = rows == 2 ? it + Hq : hi;
        for (int64_t hh = h; m * Hq + hh < end && hh < Hq;) {
            const int64_t kvh = hh / group;
            int64_t n = (kvh + 1) * group - hh;
            if (n > end - (m * Hq + hh)) n = end - (m * Hq + hh);
            if (n > 4) n = 4;
            int64_t its[KM_FA_G];
            for (int64_t i = 0; i < n; i++) {
                its[i] = m * Hq + hh + i;
                its[n + i] = (m + 1) * Hq + hh + i;
            }
            run(a, its, (int)n, rows, kvh, m);
            hh += n;
        }
        it = rows == 2 ? it + 2 * Hq : (m + 1) * Hq < hi ? (m + 1) * Hq : hi;
    }
}

#endif /* KM_ATTENTION_GGMLFA_AVX512_BODY_H */
