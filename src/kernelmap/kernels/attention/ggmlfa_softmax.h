/* attention/ggmlfa_softmax.h — the online-softmax step of llama.cpp's CPU flash attention, shared by the family
 * bodies attention/ggmlfa_body.h (f16 K/V) and attention/ggmlfa_q8kv_body.h (q8_0 K/V): per key in order, if
 * s > M then ms = expf(M - s), M = s, vs = 1, else ms = 1, vs = expf(s - M); S = fma(S, ms, vs). expf is
 * km_expf.h's (x86-64 glibc's bits on every ISA): the values come from kl_fv_expf over a block of keys when it equals
 * the scalar km_expf on a sample (checked once per process), else from km_expf itself, the same bits either way.
 */
#ifndef KM_GGMLFA_SOFTMAX_H
#define KM_GGMLFA_SOFTMAX_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "km_lanes.h"

/* ---- expf: kl_fv_expf, checked against km_expf at first use ---- */
static int kfa_vexp_state; /* 0 not checked yet, 1 kl_fv_expf == km_expf on the sample, 2 use km_expf */

static int kfa_vexp_usable(void) {
    int st = __atomic_load_n(&kfa_vexp_state, __ATOMIC_RELAXED);
    if (st == 0) {
        st = 1;
        uint32_t b = 0x9e3779b9u;
        for (int i = 0; i < 4096 && st == 1; i += KL_FV_LANES) {
            float xs[KL_FV_LANES], ys[KL_FV_LANES];
            for (int l = 0; l < KL_FV_LANES; l++) {
                b = b * 1664525u + 1013904223u;
                /* alternately any bits and negative values of magnitude below 104 */
                const uint32_t u = (l & 1) ? b : 0x80000000u | (b % 0x42d00000u);
                memcpy(&xs[l], &u, 4);
            }
            kl_fv_storeu(ys, kl_fv_expf(kl_fv_loadu(xs)));
            for (int l = 0; l < KL_FV_LANES; l++) {
                const float e = km_expf(xs[l]);
                if (memcmp(&e, &ys[l], 4) != 0) st = 2;
            }
        }
        __atomic_store_n(&kfa_vexp_state, st, __ATOMIC_RELAXED);
    }
    return st == 1;
}

/* ---- online softmax ---- */

/* Keys k < nk of item g (scores sc[k], running *big_m = M, *big_s = S), with the contract's values key by key: if
 * s > M, ms = expf(M - s), M = s, vs = 1 and bit g of nmask[k] is set (VKQ is rescaled); else ms = 1,
 * vs = expf(s - M); S = fma(S, ms, vs) in key order. KL_FV_LANES keys per step: the running maximum before each key
 * is a prefix maximum (a key replaces it only when strictly greater, NaN never: NaN lanes enter the scan as -inf),
 * so it is scanned in lanes (kl_fv_prefix_max); lanes past nk enter as -inf with expf argument 0. */
static inline void kfa_softmax(float *sc, float *ms, float *vs, uint8_t *nmask, int g, int64_t nk, float *big_m,
        float *big_s, int use_vexp) {
    static const float iota[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
    const kl_fv ninf = kl_fv_set1(-INFINITY), one = kl_fv_set1(1.0f), zero = kl_fv_zero();
    float mcur = *big_m;
    for (int64_t k = nk; k % KL_FV_LANES != 0; k++) sc[k] = -INFINITY;
    for (int64_t k0 = 0; k0 < nk; k0 += KL_FV_LANES) {
        const kl_fv s = kl_fv_loadu(sc + k0);
        const kl_fv pm = kl_fv_blend(s, ninf, kl_fv_isnan(s));
        const kl_fv mprev = kl_fv_prefix_max(pm, mcur);
        const kl_fvm nm = kl_fv_cmp_lt(mprev, s);
        const kl_fvm valid = kl_fv_cmp_lt(kl_fv_loadu(iota), kl_fv_set1((float)(nk - k0)));
        const kl_fv arg = kl_fv_blend(zero, kl_fv_blend(kl_fv_sub(s, mprev), kl_fv_sub(mprev, s), nm), valid);
        kl_fv e;
        if (use_vexp) {
            e = kl_fv_expf(arg);
        } else {
            float t[KL_FV_LANES];
            kl_fv_storeu(t, arg);
            for (int l = 0; l < KL_FV_LANES; l++) t[l] = km_expf(t[l]);
            e = kl_fv_loadu(t);
        }
        kl_fv_storeu(ms + k0, kl_fv_blend(one, e, nm));
        kl_fv_storeu(vs + k0, kl_fv_blend(e, one, nm));
        const unsigned bits = kl_fvm_bits(nm);
        for (int l = 0; l < KL_FV_LANES && k0 + l < nk; l++) nmask[k0 + l] |= (uint8_t)((bits >> l & 1u) << g);
        float last[KL_FV_LANES];
        kl_fv_storeu(last, kl_fv_max(pm, mprev)); /* inclusive: lane l's maximum after key k0 + l */
        mcur = last[KL_FV_LANES - 1];
    }
    float ss = *big_s;
    for (int64_t k = 0; k < nk; k++) ss = kl_f32_fma(ss, ms[k], vs[k]);
    *big_m = mcur;
    *big_s = ss;
}

#endif /* KM_GGMLFA_SOFTMAX_H */
