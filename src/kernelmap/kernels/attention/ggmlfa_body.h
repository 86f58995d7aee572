/* attention/ggmlfa_body.h — the family body of llama.cpp's one-row CPU flash attention (f16 K/V), written once
 * against the lanes interface (common/km_lanes.h) and instantiated per ISA (ggmlfa_*_<isa>.c).
 *
 * Contracts (one arithmetic order, two places for the scale: the family parameter):
 *   attention.f16kv.ggml_fa.v1 (ggmlfa_ref.c): Q16 = f16(q * scale), scores unscaled (q_scale = scale, kq = 1);
 *   attention_kq.f16kv.ggml_fa.v1 (ggmlfa_kq_ref.c): Q16 = f16(q), each score f32(dot) * scale (q_scale = 1,
 *     kq = scale): the multiply comes after the fold and the double tail, before the online softmax;
 *   attention.f16kv.ggml_fa_split<N>.v1 (ggmlfa_split_ref.c): the ggml_fa order per key range of llama.cpp's
 *     N-thread split, partials merged by attention_ggmlfa_split.h (n_split = N; 1 = no split);
 *   attention.f16kv.ggml_fa_dot32.v1 (ggmlfa_dot32_ref.c): ggml_fa with the score dot of llama.cpp's AVX2 build
 *     (the second family parameter, KFA_DOTW = 32 partials instead of the AVX-512 build's 64).
 * The refs' contract comments list every rounding; the steps here make the same ones per element:
 *   score: element i < DW (D rounded down to W = KFA_DOTW, 64 or 32) of the K row times Q16 into partial i mod W
 *     by fma in increasing i (W / KL_FV_LANES native vectors), first fold P[l] = (A0[l] + A2[l]) + (A1[l] + A3[l])
 *     lane-wise (Aa = partials aW/4 ..), the rest by kl_fold16x16 (W = 64: 16 keys at a time) or per key in plain
 *     C (W = 32: T[l] = P[l] + P[l+4], (T0 + T1) + (T2 + T3)), the D % W tail in double (plain C), then * kq;
 *   online softmax, key by key (plain C scalars; expf by kl_fv_expf over a block, which is the C library's
 *     expf bit for bit: checked on a sample at first use, libm expf on any difference);
 *   VKQ columns: f32 copies of f16 values, each key's optional rescale kl_fv_rt16(VKQ * ms) and
 *     kl_fv_rt16(fma(V, vs, VKQ)) — lane-wise, so the vector width cannot change a bit.
 * KV cells: key j in cell j mod C (the refs' ring layout; C >= every position is the full-length one): kfa_run_ring
 * cuts a key range at the wrap into runs of contiguous cells, visited in increasing position.
 * Partition: attention_ggmlfa_part.h (items m*Hq + h in ranges of equal work); results do not depend on
 * (ith, nth) nor on the schedule, so every instantiation (x86 or ARM) gives the refs' bytes.
 *
 * Schedule (same roundings per element, reordered across independent chains only): a thread walks its
 * items in groups that read one KV head (up to 4 heads of a row; with KFA_PAIRS the same heads of the next
 * row too when both rows are whole in range: the keys only one row sees go before / after the common ones,
 * so each item still visits its keys in increasing j). Keys go in blocks of KFA_KB: (1) the block's scores
 * for every item (KFA_SG items share each widened K vector), (2) the softmax scalars per item, (3) VKQ in
 * column chunks held in registers (KFA_NV vectors per item for up to 4 items, KFA_NV8 for more), each V
 * vector widened once for all items. With KFA_FUSED, when D % W == 0 and D / chunk >= items, blocks are
 * 16 keys and chunk c of (3) also computes item c's scores of the next block from K rows widened once,
 * so score FMAs overlap the VKQ chain's f16 conversions.
 * Schedule parameters (the instantiation #defines them): KFA_KB (16 or 32), KFA_SG, KFA_NV, KFA_NV8 (<= 8),
 * KFA_NV2 (optional, <= 8, default KFA_NV: vectors per item for groups of 1 or 2 items; each VKQ vector is a chain
 * fma -> f16 -> f32 of ~15 cycles per key on AVX2, so 2 items x 2 vectors left the ports idle: decode on 2 threads
 * gives each thread 2 of Gemma's 4 heads),
 * KFA_PAIRS, KFA_FUSED (0 / 1), KFA_PFD (optional, default 2: the fused schedule prefetches the V rows KFA_PFD
 * blocks ahead and the K rows one block further; without it the fused schedule read the cache unprefetched, and at
 * decode the cache comes from DRAM, the weights streamed since the last step having evicted it: Gemma 3 270M, 2
 * threads, in-process A/B of two builds, attention 0.77 -> 0.46-0.65 ms per decode step and 24.5 -> 18-19 ms per
 * 256-token prefill; 2 blocks ahead vs 1: decode attention -6%, prefill equal; a block's prefetches go out a share
 * per key step of its VKQ pass (kfa_pfq), not in one burst before it: 256 lines at once filled the miss buffers and
 * stalled the core for most of a block — one decode call, 4 heads x 385 keys of D = 256 from DRAM, Zen 5: 43 -> 28 us
 * (22-24 us with the cache hot), one thread's 2 heads of a 2-thread call 31-37 -> 18.5 us),
 * KFA_EXPF_HOOK (1: export the test hook km_ggmlfa_expf_check<lanes>); the
 * numerics parameter KFA_DOTW (64 when not defined; 32 needs KL_FV_LANES <= 8: its first fold is on 8 lanes).
 */
#ifndef KM_GGMLFA_BODY_H
#define KM_GGMLFA_BODY_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "km_lanes.h"
#include "attention_ggmlfa_part.h"
#include "attention_ggmlfa_split.h"
#include "ggmlfa_softmax.h"

#define KFA_DMAX 512
#define KFA_GMAX 8                   /* items per group (row pairs of 4 heads) */
#define KFA_KBF 16                   /* keys per block, fused schedule */
#ifndef KFA_PFD
#define KFA_PFD 2                    /* fused schedule: blocks ahead the V (and, one block further, K) rows are prefetched */
#endif
#ifndef KFA_NV2
#define KFA_NV2 KFA_NV               /* vectors per item in a VKQ chunk for groups of 1 or 2 items */
#endif
#define KFA_NVMAX 8                  /* the largest of KFA_NV, KFA_NV8, KFA_NV2 */
#if KFA_NV > KFA_NVMAX || KFA_NV8 > KFA_NVMAX || KFA_NV2 > KFA_NVMAX
#error "ggmlfa_body.h: KFA_NV, KFA_NV8 and KFA_NV2 are at most 8"
#endif
#define KFA_NVG(G) ((G) > 4 ? KFA_NV8 : (G) > 2 ? KFA_NV : KFA_NV2) /* vectors per item of a group of G */
#ifndef KFA_DOTW
#define KFA_DOTW 64                  /* dot partials: llama.cpp's AVX-512 build (32: its AVX2 build) */
#endif
#if KFA_DOTW != 64 && KFA_DOTW != 32
#error "ggmlfa_body.h: KFA_DOTW must be 64 or 32"
#endif
#if KL_FV_LANES > KFA_DOTW / 4
#error "ggmlfa_body.h: the first fold of KFA_DOTW partials needs lanes of at most KFA_DOTW / 4 floats"
#endif
#define KFA_PV (KFA_DOTW / KL_FV_LANES)        /* native vectors of the dot partials */
#define KFA_FV (KFA_DOTW / 4 / KL_FV_LANES)    /* native vectors of the first fold's lanes (16 or 8) */
#define KFA_AI static inline __attribute__((always_inline))
#define KFA_ALIGN __attribute__((aligned(64)))

/* Memory hint only: the cache lines of two byte ranges (a: na lines, then b: nb lines) handed out `per` at a time,
 * so that a block's prefetches spread over its VKQ pass instead of going out in one burst. */
typedef struct {
    const char *a, *b;
    int64_t na, nb, next;
    int64_t per;
} kfa_pfq;

KFA_AI void kfa_pfq_step(kfa_pfq *q) {
    for (int64_t t = 0; t < q->per; t++, q->next++) {
        if (q->next < q->na) {
            kl_prefetch_l2(q->a + q->next * 64);
        } else if (q->next - q->na < q->nb) {
            kl_prefetch_l2(q->b + (q->next - q->na) * 64);
        }
    }
}

#if KFA_EXPF_HOOK
#define KFA_CAT2(a, b) a##b
#define KFA_CAT(a, b) KFA_CAT2(a, b)
#define KFA_HOOK KFA_CAT(km_ggmlfa_expf_check, KL_FV_LANES)
/* Test hook: how many of the float bit patterns lo .. lo+n-1 give a kl_fv_expf result that differs (bitwise)
 * from expf; the first such pattern goes to *first. Exported on purpose, so declared (model builds refuse
 * undeclared exports); a helper, so its name is not km_<id>__<variant>. */
int64_t KFA_HOOK(uint32_t lo, int64_t n, uint32_t *first);
int64_t KFA_HOOK(uint32_t lo, int64_t n, uint32_t *first) {
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i += KL_FV_LANES) {
        uint32_t u[KL_FV_LANES];
        float xs[KL_FV_LANES], ys[KL_FV_LANES];
        for (int l = 0; l < KL_FV_LANES; l++) u[l] = lo + (uint32_t)(i + l < n ? i + l : 0);
        memcpy(xs, u, sizeof xs);
        kl_fv_storeu(ys, kl_fv_expf(kl_fv_loadu(xs)));
        for (int l = 0; l < KL_FV_LANES && i + l < n; l++) {
            const float e = expf(xs[l]);
            if (memcmp(&e, &ys[l], 4) != 0) {
                if (bad == 0) *first = u[l];
                bad++;
            }
        }
    }
    return bad;
}
#endif

/* ---- scores ---- */

/* The first fold step of one key's W partials a[] to its W/4 P lanes at pk (a slot of 16): P[l] = (A0[l] + A2[l]) +
 * (A1[l] + A3[l]), Aa[l] = partial (W/4)a + l. */
KFA_AI void kfa_fold4(float *pk, const kl_fv *a) {
    for (int t = 0; t < KFA_FV; t++) {
        kl_fv_storeu(pk + t * KL_FV_LANES, kl_fv_add(kl_fv_add(a[t], a[2 * KFA_FV + t]),
                                                     kl_fv_add(a[KFA_FV + t], a[3 * KFA_FV + t])));
    }
}

/* P lanes pb[(g*KB + k)*16 ..] of keys k < nk (K rows kr + k*D) for the G items of widened Q16 rows qf + g*D.
 * Memory hint only: with pv, each key's step also prefetches row k of pv (the block's V rows, read next by the VKQ
 * pass in column chunks: a stride of D halves the hardware prefetchers do not follow) and, for k < npk, row k of
 * pk (the next block's K rows). */
KFA_AI void kfa_partials(float *pb, const km_half *kr, int64_t nk, const float *qf, int64_t D, const int G,
        const km_half *pv, const km_half *pk, int64_t npk) {
    const int64_t dw = D & ~(int64_t)(KFA_DOTW - 1);
    for (int64_t k = 0; k < nk; k++) {
        const km_half *kk = kr + k * D;
        if (pv) {
            for (int64_t o = 0; o < D; o += 32) kl_prefetch_l2(pv + k * D + o);
            if (k < npk) {
                for (int64_t o = 0; o < D; o += 32) kl_prefetch_l2(pk + k * D + o);
            }
        }
        kl_fv a[KFA_SG][KFA_PV];
        for (int g = 0; g < G; g++) {
            for (int r = 0; r < KFA_PV; r++) a[g][r] = kl_fv_zero();
        }
        for (int64_t c = 0; c < dw; c += KFA_DOTW) {
            for (int r = 0; r < KFA_PV; r++) {
                const kl_fv x = kl_fv_load_f16(kk + c + r * KL_FV_LANES);
                for (int g = 0; g < G; g++) a[g][r] = kl_fv_fma(x, kl_fv_loadu(qf + g * D + c + r * KL_FV_LANES), a[g][r]);
            }
        }
        for (int g = 0; g < G; g++) kfa_fold4(pb + (g * KFA_KB + k) * 16, a[g]);
    }
}

/* The rest of the score after the P lanes: the fold (W = 64: 16 keys at a time; W = 32: per key), the D % W tail
 * in double (each product in float), then times kq (skipped when kq is 1: the same value). */
KFA_AI void kfa_finish(float *sc, const float *pb, const km_half *kr, int64_t nk, const float *qf, int64_t D, float kq,
        const int G) {
    const int64_t dw = D & ~(int64_t)(KFA_DOTW - 1);
#if KFA_DOTW == 64
    for (int g = 0; g < G; g++) {
        for (int64_t k = 0; k < nk; k += 16) kl_fold16x16(sc + g * KFA_KB + k, pb + (g * KFA_KB + k) * 16);
    }
#else
    for (int g = 0; g < G; g++) {
        for (int64_t k = 0; k < nk; k++) {
            const float *p = pb + (g * KFA_KB + k) * 16;
            const float t0 = p[0] + p[4], t1 = p[1] + p[5], t2 = p[2] + p[6], t3 = p[3] + p[7];
            sc[g * KFA_KB + k] = (t0 + t1) + (t2 + t3);
        }
    }
#endif
    if (dw < D) {
        for (int g = 0; g < G; g++) {
            for (int64_t k = 0; k < nk; k++) {
                const km_half *kk = kr + k * D;
                double res = (double)sc[g * KFA_KB + k];
                for (int64_t i = dw; i < D; i++) res += (double)(km_fp16_to_fp32(kk[i]) * qf[g * D + i]);
                sc[g * KFA_KB + k] = (float)res;
            }
        }
    }
    if (kq != 1.0f) {
        for (int g = 0; g < G; g++) {
            for (int64_t k = 0; k < nk; k++) sc[g * KFA_KB + k] = sc[g * KFA_KB + k] * kq;
        }
    }
}

/* Scores sc[g*KB + k] of keys k < nk for G items: partials in parts of KFA_SG items, then the fold; the first part
 * prefetches pv / pk (kfa_partials; pv NULL: none). */
KFA_AI void kfa_scores(float *sc, const km_half *kr, int64_t nk, const float *qf, int64_t D, float kq, const int G,
        const km_half *pv, const km_half *pk, int64_t npk) {
    float pb[KFA_GMAX * KFA_KB * 16] KFA_ALIGN; /* [G][KB][16] P lanes */
    /* straight-line parts (no loop), so each part's item count is a constant and its partials stay in registers */
#define KFA_PART(i) \
    if (G > (i) * KFA_SG) { \
        kfa_partials(pb + (i) * KFA_SG * KFA_KB * 16, kr, nk, qf + (i) * KFA_SG * D, D, \
                     G - (i) * KFA_SG < KFA_SG ? G - (i) * KFA_SG : KFA_SG, (i) == 0 ? pv : NULL, pk, npk); \
    }
    KFA_PART(0)
    KFA_PART(1)
    KFA_PART(2)
    KFA_PART(3)
    KFA_PART(4)
    KFA_PART(5)
    KFA_PART(6)
    KFA_PART(7)
#undef KFA_PART
    kfa_finish(sc, pb, kr, nk, qf, D, kq, G);
}

/* ---- VKQ ---- */

/* One key's step on NV vectors of G items: optional rescale by ms (bit g of nm), then the V mad with vs. */
KFA_AI void kfa_vstep(kl_fv a[][KFA_NVMAX], const kl_fv *x, unsigned nm, const float *vs, const float *ms, int64_t k,
        const int G, const int NV) {
    if (__builtin_expect(nm != 0, 0)) {
        for (int g = 0; g < G; g++) {
            if (nm >> g & 1u) {
                const kl_fv b = kl_fv_set1(ms[g * KFA_KB + k]);
                for (int v = 0; v < NV; v++) a[g][v] = kl_fv_rt16(kl_fv_mul(a[g][v], b));
            }
        }
    }
    for (int g = 0; g < G; g++) {
        const kl_fv b = kl_fv_set1(vs[g * KFA_KB + k]);
        for (int v = 0; v < NV; v++) a[g][v] = kl_fv_rt16(kl_fv_fma(x[v], b, a[g][v]));
    }
}

/* VKQ columns d0 .. d0 + NV*LANES - 1 of the G items (acc + g*D) through keys k < nk of the block (V rows vr + k*D);
 * with nk2 > 0 also the P lanes of the next block's keys k < nk2 for one item (widened K rows kf + k*D against qg,
 * partials in increasing i as kfa_partials, first fold step) to pk + k*16. */
KFA_AI void kfa_vchunk(float *acc, int64_t D, int64_t d0, const km_half *vr, int64_t nk, const float *vs,
        const float *ms, const uint8_t *nmask, const float *kf, int64_t nk2, const float *qg, float *pk, const int G,
        const int NV, kfa_pfq *pq) {
    kl_fv a[KFA_GMAX][KFA_NVMAX];
    for (int g = 0; g < G; g++) {
        for (int v = 0; v < NV; v++) a[g][v] = kl_fv_loadu(acc + g * D + d0 + v * KL_FV_LANES);
    }
    for (int64_t k = 0; k < nk; k++) {
        kl_fv x[KFA_NVMAX];
        for (int v = 0; v < NV; v++) x[v] = kl_fv_load_f16(vr + k * D + d0 + v * KL_FV_LANES);
        kfa_vstep(a, x, nmask[k], vs, ms, k, G, NV);
        if (pq) kfa_pfq_step(pq);
        if (k < nk2) {
            const float *kk = kf + k * D;
            kl_fv s[KFA_PV];
            for (int r = 0; r < KFA_PV; r++) s[r] = kl_fv_zero();
            for (int64_t c = 0; c < D; c += KFA_DOTW) {
                for (int r = 0; r < KFA_PV; r++) {
                    s[r] = kl_fv_fma(kl_fv_loadu(kk + c + r * KL_FV_LANES), kl_fv_loadu(qg + c + r * KL_FV_LANES), s[r]);
                }
            }
            kfa_fold4(pk + k * 16, s);
        }
    }
    for (int g = 0; g < G; g++) {
        for (int v = 0; v < NV; v++) kl_fv_storeu(acc + g * D + d0 + v * KL_FV_LANES, a[g][v]);
    }
}

/* VKQ of the block in column chunks (NV vectors per item, the D % chunk tail one vector at a time); fused: chunk c
 * (c < G) also computes item c's next-block P lanes into pb. With pq, each key step of the whole chunks issues an
 * equal share of pq's prefetches. */
KFA_AI void kfa_vblock(float *acc, int64_t D, const km_half *vr, int64_t nk, const float *vs, const float *ms,
        const uint8_t *nmask, const float *kf, int64_t nk2, const float *qf, float *pb, const int G, kfa_pfq *pq) {
    const int NV = KFA_NVG(G);
    const int64_t cw = (int64_t)NV * KL_FV_LANES;
    const int64_t dm = D - D % cw;
    if (pq) {
        const int64_t steps = dm / cw * nk;
        pq->per = steps > 0 ? (pq->na + pq->nb + steps - 1) / steps : 0;
    }
    for (int64_t c = 0; c * cw < dm; c++) {
        if (c < G && nk2 > 0) {
            kfa_vchunk(acc, D, c * cw, vr, nk, vs, ms, nmask, kf, nk2, qf + c * D, pb + c * KFA_KB * 16, G, NV, pq);
        } else {
            kfa_vchunk(acc, D, c * cw, vr, nk, vs, ms, nmask, NULL, 0, NULL, NULL, G, NV, pq);
        }
    }
    for (int64_t d0 = dm; d0 < D; d0 += KL_FV_LANES) {
        kfa_vchunk(acc, D, d0, vr, nk, vs, ms, nmask, NULL, 0, NULL, NULL, G, 1, NULL);
    }
}

/* ---- groups ---- */

/* The state of a group of up to KFA_GMAX items (query rows x heads that read one KV head). */
typedef struct {
    float qf[KFA_GMAX * KFA_DMAX] KFA_ALIGN;  /* [G][D] f32(Q16) */
    float acc[KFA_GMAX * KFA_DMAX] KFA_ALIGN; /* [G][D] f32(VKQ) */
    float big_m[KFA_GMAX], big_s[KFA_GMAX];
    float kq; /* multiplies each score after the dot */
} kfa_state;

/* Memory hint only: the rows a .. b (none when a > b) of the cache at base, D halves each, towards L2. */
KFA_AI void kfa_prefetch_rows(const km_half *base, int64_t a, int64_t b, int64_t D) {
    for (int64_t j = a; j <= b; j++) {
        for (int64_t o = 0; o < D; o += 32) kl_prefetch_l2(base + j * D + o);
    }
}

/* The same rows as one queue range: where they start and how many cache lines they span (0 when a > b). */
KFA_AI const char *kfa_rows_range(const km_half *base, int64_t a, int64_t b, int64_t D, int64_t *lines) {
    *lines = a <= b ? ((b - a + 1) * D * (int64_t)sizeof(km_half) + 63) / 64 : 0;
    return a <= b ? (const char *)(base + a * D) : NULL;
}

/* Keys js .. je (increasing; none when js > je) for the G items whose state starts at item g0 of st. */
KFA_AI void kfa_run(kfa_state *st, int g0, const km_half *kb, const km_half *vb, int64_t D, int64_t js, int64_t je,
        int use_vexp, const int G) {
    float sc[KFA_GMAX * KFA_KB] KFA_ALIGN; /* [G][KB] scores */
    float vs[KFA_GMAX * KFA_KB] KFA_ALIGN;
    float ms[KFA_GMAX * KFA_KB] KFA_ALIGN;
    float kf[KFA_FUSED ? KFA_KBF * KFA_DMAX : 1] KFA_ALIGN;            /* [KBF][D] widened K rows (fused) */
    float pb[KFA_FUSED ? KFA_GMAX * KFA_KB * 16 : 1] KFA_ALIGN;        /* [G][KB][16] next-block P lanes (fused) */
    uint8_t nmask[KFA_KB];
    float *qf = st->qf + g0 * D, *acc = st->acc + g0 * D, *big_m = st->big_m + g0, *big_s = st->big_s + g0;
    const int64_t cw = (int64_t)KFA_NVG(G) * KL_FV_LANES;
    const int fused = KFA_FUSED && D % KFA_DOTW == 0 && D % cw == 0 && D / cw >= G;
    const int64_t step = fused ? KFA_KBF : KFA_KB;
    if (fused && js <= je) {
        /* the first block's V rows and the second block's K rows (the loop below prefetches one block on) */
        kfa_prefetch_rows(vb, js, js + KFA_PFD * step - 1 < je ? js + KFA_PFD * step - 1 : je, D);
        kfa_prefetch_rows(kb, js + step, js + (KFA_PFD + 1) * step - 1 < je ? js + (KFA_PFD + 1) * step - 1 : je, D);
        kfa_scores(sc, kb + js * D, je + 1 - js < step ? je + 1 - js : step, qf, D, st->kq, G, NULL, NULL, 0);
    }
    for (int64_t jb = js; jb <= je; jb += step) {
        const int64_t nk = je + 1 - jb < step ? je + 1 - jb : step;
        if (!fused) {
            const int64_t npk = je + 1 - (jb + step) < step ? je + 1 - (jb + step) : step; /* <= 0: no next block */
            kfa_scores(sc, kb + jb * D, nk, qf, D, st->kq, G, vb + jb * D, npk > 0 ? kb + (jb + step) * D : NULL, npk);
        }
        for (int64_t k = 0; k < nk; k++) nmask[k] = 0;
        for (int g = 0; g < G; g++) {
            kfa_softmax(sc + g * KFA_KB, ms + g * KFA_KB, vs + g * KFA_KB, nmask, g, nk, &big_m[g], &big_s[g], use_vexp);
        }
        if (!fused) {
            kfa_vblock(acc, D, vb + jb * D, nk, vs, ms, nmask, NULL, 0, qf, NULL, G, NULL);
            continue;
        }
        const int64_t jn = jb + step;
        const int64_t nk2 = jn > je ? 0 : (je + 1 - jn < step ? je + 1 - jn : step);
        /* memory hint: V rows KFA_PFD blocks on and K rows one block further (at decode the cache comes from DRAM:
         * the weights streamed since the last step evicted it), spread over this block's VKQ pass */
        kfa_pfq pq = {0};
        {
            const int64_t pa = jb + KFA_PFD * step; /* V rows pa.., K rows pa + step.. */
            pq.a = kfa_rows_range(vb, pa, pa + step - 1 < je ? pa + step - 1 : je, D, &pq.na);
            pq.b = kfa_rows_range(kb, pa + step, pa + 2 * step - 1 < je ? pa + 2 * step - 1 : je, D, &pq.nb);
        }
        for (int64_t k = 0; k < nk2; k++) {
            for (int64_t d = 0; d < D; d += KL_FV_LANES) kl_fv_storeu(kf + k * D + d, kl_fv_load_f16(kb + (jn + k) * D + d));
        }
        kfa_vblock(acc, D, vb + jb * D, nk, vs, ms, nmask, kf, nk2, qf, pb, G, &pq);
        if (nk2 > 0) kfa_finish(sc, pb, kb + jn * D, nk2, qf, D, st->kq, G);
    }
}

#define KFA_RUN(n) \
    static void kfa_run##n(kfa_state *st, int g0, const km_half *kb, const km_half *vb, int64_t D, int64_t js, \
            int64_t je, int use_vexp) { \
        kfa_run(st, g0, kb, vb, D, js, je, use_vexp, n); \
    }
KFA_RUN(1)
KFA_RUN(2)
KFA_RUN(3)
KFA_RUN(4)
#if KFA_PAIRS
KFA_RUN(6)
KFA_RUN(8)
#endif

static void kfa_run_n(kfa_state *st, int g0, int n, const km_half *kb, const km_half *vb, int64_t D, int64_t js,
        int64_t je, int use_vexp) {
    switch (n) {
    case 1: kfa_run1(st, g0, kb, vb, D, js, je, use_vexp); break;
    case 2: kfa_run2(st, g0, kb, vb, D, js, je, use_vexp); break;
    case 3: kfa_run3(st, g0, kb, vb, D, js, je, use_vexp); break;
#if KFA_PAIRS
    case 6: kfa_run6(st, g0, kb, vb, D, js, je, use_vexp); break;
    case 8: kfa_run8(st, g0, kb, vb, D, js, je, use_vexp); break;
#endif
    default: kfa_run4(st, g0, kb, vb, D, js, je, use_vexp); break;
    }
}

/* Keys js .. je (positions, increasing; none when js > je) where key j lives in cell j mod C (the ring layout; the
 * full-length one when C > je): each stretch of contiguous cells is one kfa_run_n, so a range that wraps is two
 * runs, cells js mod C .. C-1 then 0 .., still in increasing position (the state carries over between runs, and
 * a run's key blocks never change a rounding, so the bits are those of one run). */
static void kfa_run_ring(kfa_state *st, int g0, int n, const km_half *kb, const km_half *vb, int64_t D, int64_t C,
        int64_t js, int64_t je, int use_vexp) {
    while (js <= je) {
        const int64_t c0 = js % C;
        const int64_t len = je - js + 1 < C - c0 ? je - js + 1 : C - c0;
        kfa_run_n(st, g0, n, kb, vb, D, c0, c0 + len - 1, use_vexp);
        js += len;
    }
}

/* What a group needs besides its items. */
typedef struct {
    float *y;
    const float *q;
    const km_half *kc, *vc; /* [Hkv][C][D] */
    int64_t D, C, pos, window, n_split;
    float q_scale; /* multiplies Q before its f16 rounding */
    float kq;      /* multiplies each score after the dot */
} kfa_args;

/* Q16 = f16(q * q_scale) of the G items its[g], widened, into st->qf; a fresh state (VKQ 0, M -inf, S 0). */
static inline void kfa_group_start(kfa_state *st, const kfa_args *a, const int64_t *its, int G) {
    const kl_fv vscale = kl_fv_set1(a->q_scale);
    const int64_t D = a->D;
    st->kq = a->kq;
    for (int g = 0; g < G; g++) {
        const float *qr = a->q + its[g] * D;
        for (int64_t d = 0; d < D; d += KL_FV_LANES) {
            kl_fv_storeu(st->qf + g * D + d, kl_fv_rt16(kl_fv_mul(kl_fv_loadu(qr + d), vscale)));
        }
    }
}

static inline void kfa_reset(kfa_state *st, int G, int64_t D) {
    for (int g = 0; g < G; g++) {
        for (int64_t d = 0; d < D; d++) st->acc[g * D + d] = 0.0f;
        st->big_m[g] = -INFINITY;
        st->big_s[g] = 0.0f;
    }
}

/* The keys of n heads of row m (position p) and, when rows == 2, of the same heads of row m+1 (items n .. 2n-1),
 * only those in lo .. hi. Row m+1 sees keys j1 .. p+1 with j1 in {j0, j0+1}: the keys only row m sees, the common
 * keys for all 2n items, then key p+1 for row m+1, so each item visits exactly its keys in increasing j. */
static inline void kfa_keys(kfa_state *st, int n, int rows, const km_half *kb, const km_half *vb, int64_t D, int64_t C,
        int64_t p, int64_t window, int64_t lo, int64_t hi, int use_vexp) {
    const int64_t j0 = (window > 0 && p - window + 1 > 0) ? p - window + 1 : 0;
#define KFA_CLIP(a, b) ((a) > lo ? (a) : lo), ((b) < hi ? (b) : hi)
    if (rows == 1) {
        kfa_run_ring(st, 0, n, kb, vb, D, C, KFA_CLIP(j0, p), use_vexp);
    } else {
        const int64_t j1 = (window > 0 && p + 1 - window + 1 > 0) ? p + 1 - window + 1 : 0;
        kfa_run_ring(st, 0, n, kb, vb, D, C, KFA_CLIP(j0, j1 - 1), use_vexp);
        kfa_run_ring(st, 0, 2 * n, kb, vb, D, C, KFA_CLIP(j1, p), use_vexp);
        kfa_run_ring(st, n, n, kb, vb, D, C, KFA_CLIP(p + 1, p + 1), use_vexp);
    }
#undef KFA_CLIP
}

/* One group (rows m and, when rows == 2, m+1): one pass over the keys, or (n_split > 1 and a view of >= 512
 * cells) one fresh state per llama.cpp key range, merged in range order; y = VKQ * (S == 0 ? 0 : 1/S). */
static void kfa_group(const kfa_args *a, const int64_t *its, int n, int rows, int64_t kvh, int64_t m) {
    kfa_state st;
    const int G = n * rows;
    const int64_t D = a->D, p = a->pos + m;
    const km_half *kb = a->kc + kvh * a->C * D, *vb = a->vc + kvh * a->C * D;
    const int use_vexp = kfa_vexp_usable();
    kfa_group_start(&st, a, its, G);
    if (a->n_split <= 1 || !km_fa_is_split(p)) {
        kfa_reset(&st, G, D);
        kfa_keys(&st, n, rows, kb, vb, D, a->C, p, a->window, 0, p + 1, use_vexp);
        for (int g = 0; g < G; g++) {
            const float inv = st.big_s[g] == 0.0f ? 0.0f : 1.0f / st.big_s[g];
            const kl_fv vi = kl_fv_set1(inv);
            float *yr = a->y + its[g] * D;
            for (int64_t d = 0; d < D; d += KL_FV_LANES) kl_fv_storeu(yr + d, kl_fv_mul(kl_fv_loadu(st.acc + g * D + d), vi));
        }
        return;
    }
    float fin[KFA_GMAX * KFA_DMAX]; /* [G][D] merged */
    float fin_m[KFA_GMAX], fin_s[KFA_GMAX];
    for (int g = 0; g < G; g++) {
        for (int64_t d = 0; d < D; d++) fin[g * D + d] = 0.0f;
        fin_m[g] = -INFINITY;
        fin_s[g] = 0.0f;
    }
    for (int64_t t = 0; t < a->n_split; t++) {
        int64_t lo, hi;
        km_fa_split_cells(p, a->n_split, t, &lo, &hi);
        kfa_reset(&st, G, D);
        kfa_keys(&st, n, rows, kb, vb, D, a->C, p, a->window, lo, hi, use_vexp);
        for (int g = 0; g < G; g++) {
            km_fa_split_merge(&fin_m[g], &fin_s[g], fin + g * D, st.big_m[g], st.big_s[g], st.acc + g * D, D);
        }
    }
    for (int g = 0; g < G; g++) km_fa_split_store(a->y + its[g] * D, fin + g * D, fin_s[g], D);
}

/* The entry every instantiation calls: causal GQA attention of q [M, Hq*D] over the head-major caches, Q scaled
 * by q_scale before its f16 rounding and each score by kq after the dot (the family parameter), llama.cpp's
 * N-thread key split when n_split > 1. Thread ith's items (attention_ggmlfa_part.h) go in groups: with KFA_PAIRS
 * two whole rows in range with the same KV view (split contracts) pair up; else heads of one row, at most 4 per
 * group, all reading one KV head. */
static void kfa_attention(float *y, const float *q, const void *k_cache, const void *v_cache, int64_t M, int64_t Hq,
        int64_t Hkv, int64_t D, int64_t C, int64_t pos, float q_scale, float kq, int64_t window, int64_t n_split,
        int ith, int nth) {
    const kfa_args a = {y, q, (const km_half *)k_cache, (const km_half *)v_cache, D, C, pos, window, n_split, q_scale,
                        kq};
    const int64_t group = Hq / Hkv;
    int64_t lo, hi;
    km_fa_part(M, Hq, pos, window, ith, nth, &lo, &hi);
    for (int64_t it = lo; it < hi;) {
        const int64_t m = it / Hq, h = it % Hq;
        const int pair_ok = n_split <= 1 || km_fa_llama_n_kv(pos + m) == km_fa_llama_n_kv(pos + m + 1);
        const int rows = (KFA_PAIRS && h == 0 && it + 2 * Hq <= hi && pair_ok) ? 2 : 1;
        const int64_t end = rows == 2 ? it + Hq : hi;
        for (int64_t hh = h; m * Hq + hh < end && hh < Hq;) {
            const int64_t kvh = hh / group;
            int64_t n = (kvh + 1) * group - hh;
            if (n > end - (m * Hq + hh)) n = end - (m * Hq + hh);
            if (n > 4) n = 4;
            int64_t its[KFA_GMAX];
            for (int64_t i = 0; i < n; i++) {
                its[i] = m * Hq + hh + i;
                its[n + i] = (m + 1) * Hq + hh + i;
            }
            kfa_group(&a, its, (int)n, rows, kvh, m);
            hh += n;
        }
        it = rows == 2 ? it + 2 * Hq : (m + 1) * Hq < hi ? (m + 1) * Hq : hi;
    }
}

#endif /* KM_GGMLFA_BODY_H */
