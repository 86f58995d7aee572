/* attention/attention_ggmlfa_avx2_body.h — the AVX2 + FMA + F16C steps of llama.cpp's one-row flash attention,
 * shared by ggmlfa_avx2.c (contract attention.f16kv.ggml_fa.v1) and ggmlfa_split_avx2.c (attention.f16kv.ggml_fa_split<N>.v1).
 *
 * Holds the score fold, the 8-lane expf, the online-softmax scalars, the VKQ column chunks and run_keys (keys
 * js .. je of a group of up to 4 heads of one row into an unnormalized state), plus the group helpers (Q16,
 * a fresh state, the normalized store) and the walk over a thread's items. ggmlfa_avx2.c's contract comment
 * describes the schedule and why every element sees the contract's roundings. Compile with -mavx2 -mfma -mf16c.
 */
#ifndef KM_ATTENTION_GGMLFA_AVX2_BODY_H
#define KM_ATTENTION_GGMLFA_AVX2_BODY_H

#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "km_common.h"
#include "attention_ggmlfa_part.h"
#include "attention_ggmlfa_softmax.h"

#define KM_FA_DMAX 512
#define KM_FA_KB 32 /* keys per block */
#define KM_FA_G 4   /* max heads per group */
#define KM_RNE (_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
#define KM_AI static inline __attribute__((always_inline))

KM_AI __m256 ld8(const km_half *p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)p)); }

KM_AI __m256 rt8(__m256 x) { return _mm256_cvtph_ps(_mm256_cvtps_ph(x, KM_RNE)); }

/* The rest of the fold for 8 keys at once, from h = P[l] + P[l+8] (l < 8): h[l] += h[l+4],
 * h[l] += h[l+2], s = h[0] + h[1], each step one add over lanes of several keys gathered by
 * shuffles (the contract's adds, two operands each: same bits as a per-key reduction). p[k] holds
 * the 8 lanes of key k; the 8 sums go to s[0..7] in key order. */
KM_AI void fold8(float *s, const float *p) {
    __m256 q1[4], q2[2];
    for (int i = 0; i < 4; i++) {
        const __m256 a = _mm256_load_ps(p + 16 * i), b = _mm256_load_ps(p + 16 * i + 8);
        /* lanes 0-3: key 2i's h[l] + h[l+4]; lanes 4-7: key 2i+1's */
        q1[i] = _mm256_add_ps(_mm256_permute2f128_ps(a, b, 0x20), _mm256_permute2f128_ps(a, b, 0x31));
    }
    for (int i = 0; i < 2; i++) {
        /* 128-bit block b: [u0 + u2, u1 + u3] of key 4i+b, then of key 4i+2+b */
        q2[i] = _mm256_add_ps(_mm256_shuffle_ps(q1[2 * i], q1[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                              _mm256_shuffle_ps(q1[2 * i], q1[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    }
    /* block b: v0 + v1 of keys b, 2+b, 4+b, 6+b */
    const __m256 r = _mm256_add_ps(_mm256_shuffle_ps(q2[0], q2[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                   _mm256_shuffle_ps(q2[0], q2[1], _MM_SHUFFLE(3, 1, 3, 1)));
    _mm256_store_ps(s, _mm256_permutevar8x32_ps(r, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
}

/* Scores s[g*KB + k] of keys k < nk (rows kr + k*D) against the G widened Q16 rows qf + g*D. The 64
 * partials live in 8 accumulators (partial i mod 64 in accumulator (i mod 64) / 8); with the 16-lane
 * fold's lanes 0..7 in accumulators 0,2,4,6 (A0..A3) and lanes 8..15 in 1,3,5,7. */
KM_AI void scores(float *s, const km_half *kr, int64_t nk, const float *qf, int64_t D, const int G) {
    float pb[KM_FA_G * KM_FA_KB * 8] __attribute__((aligned(32))); /* [G][KB][8] h lanes */
    const int64_t d64 = D & ~(int64_t)63;
    for (int64_t k = 0; k < nk; k++) {
        const km_half *kk = kr + k * D;
        for (int g = 0; g < G; g++) {
            __m256 a[8];
            for (int u = 0; u < 8; u++) a[u] = _mm256_setzero_ps();
            for (int64_t c = 0; c < d64; c += 64) {
                for (int u = 0; u < 8; u++) {
                    a[u] = _mm256_fmadd_ps(ld8(kk + c + 8 * u), _mm256_load_ps(qf + g * D + c + 8 * u), a[u]);
                }
            }
            const __m256 lo = _mm256_add_ps(_mm256_add_ps(a[0], a[4]), _mm256_add_ps(a[2], a[6]));
            const __m256 hi = _mm256_add_ps(_mm256_add_ps(a[1], a[5]), _mm256_add_ps(a[3], a[7]));
            _mm256_store_ps(pb + (g * KM_FA_KB + k) * 8, _mm256_add_ps(lo, hi));
        }
    }
    for (int g = 0; g < G; g++) {
        for (int64_t k = 0; k < nk; k += 8) fold8(s + g * KM_FA_KB + k, pb + (g * KM_FA_KB + k) * 8);
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

/* ---- expf on 8 lanes, bit-identical to the C library's expf (glibc >= 2.27, FMA build) ----
 * The same operations as glibc's expf (see ggmlfa_avx512.c for the derivation), 4 doubles per ymm,
 * the table by a gather; lanes with |x| >= 0x1.6p6 (inf, NaN included) call expf. A one-time
 * self-check against expf guards the process; tests check sampled ranges and (slow) all 2^32 inputs
 * (km_ggmlfa_avx2_expf_check). */
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

KM_AI __m128 vexp4(__m128 x) {
    const __m256d inv_ln2_n = _mm256_set1_pd(0x1.71547652b82fep+5), shift = _mm256_set1_pd(0x1.8p+52);
    const __m256d xd = _mm256_cvtps_pd(x);
    __m256d kd = _mm256_fmadd_pd(inv_ln2_n, xd, shift);
    const __m256i ki = _mm256_castpd_si256(kd);
    kd = _mm256_sub_pd(kd, shift);
    const __m256d r = _mm256_fmsub_pd(inv_ln2_n, xd, kd);
    __m256i t = _mm256_i64gather_epi64((const long long *)(const void *)km_fa_exp_tab,
                                       _mm256_and_si256(ki, _mm256_set1_epi64x(31)), 8);
    t = _mm256_add_epi64(t, _mm256_slli_epi64(ki, 47));
    const __m256d z = _mm256_fmadd_pd(r, _mm256_set1_pd(0x1.c6af84b912394p-20), _mm256_set1_pd(0x1.ebfce50fac4f3p-13));
    const __m256d r2 = _mm256_mul_pd(r, r);
    __m256d y = _mm256_fmadd_pd(r, _mm256_set1_pd(0x1.62e42ff0c52d6p-6), _mm256_set1_pd(1.0));
    y = _mm256_fmadd_pd(z, r2, y);
    y = _mm256_mul_pd(y, _mm256_castsi256_pd(t));
    return _mm256_cvtpd_ps(y);
}

/* expf of 8 lanes: vector path, lanes outside glibc's main range through expf itself */
static inline __m256 vexp8(__m256 x) {
    __m256 y = _mm256_set_m128(vexp4(_mm256_extractf128_ps(x, 1)), vexp4(_mm256_castps256_ps128(x)));
    const __m256i ax = _mm256_and_si256(_mm256_castps_si256(x), _mm256_set1_epi32(0x7fffffff));
    const int special = _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(ax, _mm256_set1_epi32(0x42afffff))));
    if (__builtin_expect(special != 0, 0)) {
        float xs[8], ys[8];
        _mm256_storeu_ps(xs, x);
        _mm256_storeu_ps(ys, y);
        for (int l = 0; l < 8; l++) {
            if (special >> l & 1) ys[l] = expf(xs[l]);
        }
        y = _mm256_loadu_ps(ys);
    }
    return y;
}

static int km_fa_vexp_state; /* 0 not checked yet, 1 vexp8 == expf on the sample, 2 use expf */

static int vexp_usable(void) {
    int st = __atomic_load_n(&km_fa_vexp_state, __ATOMIC_RELAXED);
    if (st == 0) {
        st = 1;
        uint32_t b = 0x9e3779b9u;
        for (int i = 0; i < 4096 && st == 1; i += 8) {
            float xs[8], ys[8];
            for (int l = 0; l < 8; l++) {
                b = b * 1664525u + 1013904223u;
                /* alternately any bits and negative values of magnitude below 104 */
                uint32_t u = (l & 1) ? b : 0x80000000u | (b % 0x42d00000u);
                memcpy(&xs[l], &u, 4);
            }
            _mm256_storeu_ps(ys, vexp8(_mm256_loadu_ps(xs)));
            for (int l = 0; l < 8; l++) {
                const float e = expf(xs[l]);
                if (memcmp(&e, &ys[l], 4) != 0) st = 2;
            }
        }
        __atomic_store_n(&km_fa_vexp_state, st, __ATOMIC_RELAXED);
    }
    return st == 1;
}

/* The online-softmax scalars of keys k < nk for one head, 8 keys per step: the running maximum before
 * each key is a prefix maximum (a key replaces it only when strictly greater, NaN never), scanned in
 * lanes; newmax = s > Mprev, e = expf(newmax ? Mprev - s : s - Mprev), ms = newmax ? e : 1,
 * vs = newmax ? 1 : e (the contract's values, key by key), and S = fma(S, ms, vs) in key order. */
static inline void softmax_block(const float *sc, float *ms, float *vs, uint8_t *nmask, int g, int64_t nk,
        float *big_m, float *big_s) {
    const __m256 ninf = _mm256_set1_ps(-INFINITY), one = _mm256_set1_ps(1.0f);
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    __m256 mcur = _mm256_set1_ps(*big_m);
    for (int64_t k0 = 0; k0 < nk; k0 += 8) {
        const __m256 valid = _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32((int)(nk - k0 < 8 ? nk - k0 : 8)), lane));
        const __m256 s = _mm256_load_ps(sc + k0);
        /* candidates: valid, non-NaN scores; others -inf (never strictly greater) */
        __m256 pm = _mm256_blendv_ps(ninf, s, _mm256_and_ps(valid, _mm256_cmp_ps(s, s, _CMP_ORD_Q)));
        for (int sh = 1; sh < 8; sh <<= 1) {
            /* earlier = pm shifted up by sh lanes (-inf in); keep the earlier unless pm is greater */
            const __m256i src = _mm256_sub_epi32(lane, _mm256_set1_epi32(sh));
            const __m256 earlier = _mm256_blendv_ps(_mm256_permutevar8x32_ps(pm, src), ninf, _mm256_castsi256_ps(src));
            pm = _mm256_blendv_ps(earlier, pm, _mm256_cmp_ps(pm, earlier, _CMP_GT_OQ));
        }
        /* exclusive prefix, combined with the maximum before this step */
        const __m256i src1 = _mm256_sub_epi32(lane, _mm256_set1_epi32(1));
        __m256 mprev = _mm256_blendv_ps(_mm256_permutevar8x32_ps(pm, src1), ninf, _mm256_castsi256_ps(src1));
        mprev = _mm256_blendv_ps(mcur, mprev, _mm256_cmp_ps(mprev, mcur, _CMP_GT_OQ));
        const __m256 nmv = _mm256_and_ps(valid, _mm256_cmp_ps(s, mprev, _CMP_GT_OQ));
        const __m256 arg = _mm256_and_ps(valid, _mm256_blendv_ps(_mm256_sub_ps(s, mprev), _mm256_sub_ps(mprev, s), nmv));
        const __m256 e = vexp8(arg);
        _mm256_store_ps(ms + k0, _mm256_blendv_ps(one, e, nmv));
        _mm256_store_ps(vs + k0, _mm256_blendv_ps(e, one, nmv));
        const unsigned nm = (unsigned)_mm256_movemask_ps(nmv);
        for (int l = 0; l < 8 && k0 + l < nk; l++) nmask[k0 + l] |= (uint8_t)((nm >> l & 1u) << g);
        /* the maximum after this step: last lane of the inclusive scan, combined with mcur */
        const __m256 last = _mm256_permutevar8x32_ps(pm, _mm256_set1_epi32(7));
        mcur = _mm256_blendv_ps(mcur, last, _mm256_cmp_ps(last, mcur, _CMP_GT_OQ));
    }
    float ss = *big_s;
    for (int64_t k = 0; k < nk; k++) ss = fmaf(ss, ms[k], vs[k]);
    *big_s = ss;
    *big_m = _mm256_cvtss_f32(mcur);
}

/* VKQ columns d0 .. d0+15 of the G heads (f32 copies of f16 values in acc + g*D) through keys
 * k < nk of the block: optional rescale by ms (bit g of nmask[k]), then the V_k mad with vs. */
KM_AI void vchunk(float *acc, int64_t D, int64_t d0, const km_half *vr, int64_t nk, const float *vs,
        const float *ms, const uint8_t *nmask, const int G) {
    __m256 a[KM_FA_G][2];
    for (int g = 0; g < G; g++) {
        for (int v = 0; v < 2; v++) a[g][v] = _mm256_load_ps(acc + g * D + d0 + 8 * v);
    }
    for (int64_t k = 0; k < nk; k++) {
        __m256 x[2];
        for (int v = 0; v < 2; v++) x[v] = ld8(vr + k * D + d0 + 8 * v);
        const unsigned nm = nmask[k];
        if (__builtin_expect(nm != 0, 0)) {
            for (int g = 0; g < G; g++) {
                if (nm >> g & 1u) {
                    const __m256 b = _mm256_set1_ps(ms[g * KM_FA_KB + k]);
                    for (int v = 0; v < 2; v++) a[g][v] = rt8(_mm256_mul_ps(a[g][v], b));
                }
            }
        }
        for (int g = 0; g < G; g++) {
            const __m256 b = _mm256_set1_ps(vs[g * KM_FA_KB + k]);
            for (int v = 0; v < 2; v++) a[g][v] = rt8(_mm256_fmadd_ps(x[v], b, a[g][v]));
        }
    }
    for (int g = 0; g < G; g++) {
        for (int v = 0; v < 2; v++) _mm256_store_ps(acc + g * D + d0 + 8 * v, a[g][v]);
    }
}

KM_AI void vblock(float *acc, int64_t D, const km_half *vr, int64_t nk, const float *vs, const float *ms,
        const uint8_t *nmask, const int G) {
    for (int64_t d0 = 0; d0 < D; d0 += 16) vchunk(acc, D, d0, vr, nk, vs, ms, nmask, G);
}

/* The state of a group of up to 4 heads of one row (reading one KV head). */
typedef struct {
    float qf[KM_FA_G * KM_FA_DMAX] __attribute__((aligned(64)));  /* [G][D] f32(Q16) */
    float acc[KM_FA_G * KM_FA_DMAX] __attribute__((aligned(64))); /* [G][D] f32(VKQ) */
    float big_m[KM_FA_G], big_s[KM_FA_G];
} km_fa_state;

/* Keys js .. je (increasing; none when js > je) of the G heads: per block of 32 keys, the scores, the
 * online-softmax scalars key by key, then the VKQ pass. */
KM_AI void run_keys(km_fa_state *st, const km_half *kb, const km_half *vb, int64_t D, int64_t js, int64_t je,
        int use_vexp, const int G) {
    float sc[KM_FA_G * KM_FA_KB] __attribute__((aligned(64)));    /* [G][KB] scores */
    float vs[KM_FA_G * KM_FA_KB] __attribute__((aligned(64)));    /* [G][KB] */
    float ms[KM_FA_G * KM_FA_KB] __attribute__((aligned(64)));    /* [G][KB] */
    uint8_t nmask[KM_FA_KB];
    float *big_m = st->big_m, *big_s = st->big_s;
    for (int64_t jb = js; jb <= je; jb += KM_FA_KB) {
        const int64_t nk = je + 1 - jb < KM_FA_KB ? je + 1 - jb : KM_FA_KB;
        scores(sc, kb + jb * D, nk, st->qf, D, G);
        for (int64_t k = 0; k < nk; k++) nmask[k] = 0;
        for (int g = 0; g < G; g++) {
            float *msg = ms + g * KM_FA_KB, *vsg = vs + g * KM_FA_KB;
            if (use_vexp) {
                softmax_block(sc + g * KM_FA_KB, msg, vsg, nmask, g, nk, &big_m[g], &big_s[g]);
            } else {
                km_fa_softmax_libm(sc + g * KM_FA_KB, msg, vsg, nmask, g, nk, &big_m[g], &big_s[g]);
            }
        }
        vblock(st->acc, D, vb + jb * D, nk, vs, ms, nmask, G);
    }
}

#define KM_FA_RUN(n) \
    static void run_keys##n(km_fa_state *st, const km_half *kb, const km_half *vb, int64_t D, int64_t js, int64_t je, \
            int use_vexp) { \
        run_keys(st, kb, vb, D, js, je, use_vexp, n); \
    }
KM_FA_RUN(1)
KM_FA_RUN(2)
KM_FA_RUN(3)
KM_FA_RUN(4)

static void run_keys_n(km_fa_state *st, int n, const km_half *kb, const km_half *vb, int64_t D, int64_t js, int64_t je,
        int use_vexp) {
    switch (n) {
    case 1: run_keys1(st, kb, vb, D, js, je, use_vexp); break;
    case 2: run_keys2(st, kb, vb, D, js, je, use_vexp); break;
    case 3: run_keys3(st, kb, vb, D, js, je, use_vexp); break;
    default: run_keys4(st, kb, vb, D, js, je, use_vexp); break;
    }
}

/* Q16 of the G items it0 .. it0+G-1 (rows q + it*D), widened to f32 into st->qf */
static inline void group_q(km_fa_state *st, const float *q, int64_t it0, int G, int64_t D, float scale) {
    const __m256 vscale = _mm256_set1_ps(scale);
    for (int g = 0; g < G; g++) {
        const float *qr = q + (it0 + g) * D;
        for (int64_t d = 0; d < D; d += 8) _mm256_store_ps(st->qf + g * D + d, rt8(_mm256_mul_ps(_mm256_loadu_ps(qr + d), vscale)));
    }
}

/* a fresh online-softmax state for G items: VKQ = 0, M = -inf, S = 0 */
static inline void group_reset(km_fa_state *st, int G, int64_t D) {
    for (int g = 0; g < G; g++) {
        for (int64_t d = 0; d < D; d += 8) _mm256_store_ps(st->acc + g * D + d, _mm256_setzero_ps());
        st->big_m[g] = -INFINITY;
        st->big_s[g] = 0.0f;
    }
}

/* y rows it0 .. it0+G-1 = f32(VKQ) * (S == 0 ? 0 : 1/S) */
static inline void group_store(const km_fa_state *st, float *y, int64_t it0, int G, int64_t D) {
    for (int g = 0; g < G; g++) {
        const __m256 vi = _mm256_set1_ps(st->big_s[g] == 0.0f ? 0.0f : 1.0f / st->big_s[g]);
        float *yr = y + (it0 + g) * D;
        for (int64_t d = 0; d < D; d += 8) _mm256_storeu_ps(yr + d, _mm256_mul_ps(_mm256_load_ps(st->acc + g * D + d), vi));
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

/* Runs items it0 .. it0+n-1: n heads of row m reading KV head kvh, whose keys are j0 .. pos+m. */
typedef void (*km_fa_group_fn)(const km_fa_args *a, int64_t it0, int n, int64_t kvh, int64_t m, int64_t j0);

/* Thread ith's items (attention_ggmlfa_part.h) in groups of up to 4 heads of one row sharing a KV head. */
static inline void km_fa_walk(const km_fa_args *a, int64_t M, int64_t Hq, int64_t Hkv, int ith, int nth,
        km_fa_group_fn run) {
    const int64_t group = Hq / Hkv;
    int64_t lo, hi;
    km_fa_part(M, Hq, a->pos, a->window, ith, nth, &lo, &hi);
    for (int64_t it = lo; it < hi;) {
        const int64_t m = it / Hq, h = it % Hq, kvh = h / group;
        const int64_t p = a->pos + m;
        const int64_t j0 = (a->window > 0 && p - a->window + 1 > 0) ? p - a->window + 1 : 0;
        int64_t n = (kvh + 1) * group - h; /* heads h .. of this row that share kvh, inside [lo, hi), at most 4 */
        if (n > hi - it) n = hi - it;
        if (n > KM_FA_G) n = KM_FA_G;
        run(a, it, (int)n, kvh, m, j0);
        it += n;
    }
}

#endif /* KM_ATTENTION_GGMLFA_AVX2_BODY_H */
