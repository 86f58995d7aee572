/* moe/router_select.h — the steps of contract moe_router.f32.ggml.v1 after the logits (softmax, top-U, weights),
 * shared by its scalar ref (moe/router_f32_ref.c) and its family body (moe/router_body.h), whose providers
 * differ only in how they compute the logits. Scalar C, one IEEE operation per step (the sources build with
 * -ffp-contract=off; fmaf is one fused operation everywhere), so every variant runs the same bits.
 *
 * km_router_select(ir, wr, p, E, U, norm, scale): p holds the row's E logits; on return ir[0..U) and
 * wr[0..U) are its experts and weights, and p its probabilities. Steps, as llama.cpp's x86 AVX-512 build:
 *   softmax: mx = max(p); for e < E - E%16, in blocks of 16: t = v_expf(logit - mx) (the 16-lane
 *     vector exp, km_ggml_expf.h), the block's lanes summed by _mm512_reduce_add_ps's tree in f32 and
 *     added to a double sum; for the last E%16: t = expf(logit - mx) (libm) added to the double sum;
 *     then each t *= (float)(1.0 / sum) (double divide, rounded to float once).
 *   top-U: the first U of argsort(p, descending) (router_sort.h: libstdc++'s std::sort).
 *   norm: s = (float)(double sum of wts in u order); s = max(min(s, inf), 6.103515625e-5);
 *     wts[u] = wts[u] / s; scale (neither 0 nor 1): wts[u] = wts[u] * scale (f32).
 * E <= KM_ROUTER_EMAX. km_router_rows: the op's row loop around a provider's logit dot.
 */
#ifndef KM_MOE_ROUTER_SELECT_H
#define KM_MOE_ROUTER_SELECT_H

#include <math.h>
#include <stdint.h>

#include "km_common.h"
#include "km_expf.h"
#include "km_ggml_expf.h"
#include "router_sort.h"

#define KM_ROUTER_EMAX 512

/* Numerics parameters (defaults: the AVX-512 build's moe_router.f32.ggml.v1): KRS_VW, the width of ggml_soft_max's
 * vector blocks, KRS_VEXPF the scalar emulation of one lane of their exp, KRS_VSUM the block's lane sum in f32.
 * moe_router.f32.ggml_dot32.v1 (llama.cpp's AVX2 build) sets 8, km_ggml_v_expf8 and km_router_reduce8. */
#ifndef KRS_VW
#define KRS_VW 16
#define KRS_VEXPF km_ggml_v_expf
#define KRS_VSUM km_router_reduce16
#endif

/* gcc's _mm512_reduce_add_ps on 16 lanes: h[l] = a[l+8] + a[l], q[l] = h[l+4] + h[l], (q0 + q2) + (q1 + q3) */
static inline float km_router_reduce16(const float a[16]) {
    float h[8], q[4];
    for (int l = 0; l < 8; l++) h[l] = a[l + 8] + a[l];
    for (int l = 0; l < 4; l++) q[l] = h[l + 4] + h[l];
    return (q[0] + q[2]) + (q[1] + q[3]);
}

/* the AVX2 build's 8-lane block sum: h[l] = a[l+4] + a[l], (h0 + h2) + (h1 + h3) */
static inline float km_router_reduce8(const float a[8]) {
    float h[4];
    for (int l = 0; l < 4; l++) h[l] = a[l + 4] + a[l];
    return (h[0] + h[2]) + (h[1] + h[3]);
}

static inline void km_router_select(int32_t *ir, float *wr, float *p, int64_t E, int64_t U, int64_t norm,
                                    float scale) {
    int32_t idx[KM_ROUTER_EMAX]; /* [E] argsort */
    float mx = -INFINITY;
    for (int64_t e = 0; e < E; e++) mx = mx > p[e] ? mx : p[e]; /* ggml's MAX(max, x), NaN and -0 included */
    double sum = 0.0;
    const int64_t vec_end = E - E % KRS_VW;
    for (int64_t e0 = 0; e0 < vec_end; e0 += KRS_VW) {
        for (int l = 0; l < KRS_VW; l++) p[e0 + l] = KRS_VEXPF(p[e0 + l] - mx);
        sum += (double)KRS_VSUM(p + e0);
    }
    for (int64_t e = vec_end; e < E; e++) {
        p[e] = km_expf(p[e] - mx);
        sum += (double)p[e];
    }
    const float inv = (float)(1.0 / sum);
    for (int64_t e = 0; e < E; e++) p[e] = p[e] * inv;
    km_argsort_desc(idx, p, E);
    for (int64_t u = 0; u < U; u++) {
        ir[u] = idx[u];
        wr[u] = p[idx[u]];
    }
    if (norm) {
        double s = 0.0;
        for (int64_t u = 0; u < U; u++) s += (double)wr[u];
        float sf = (float)s;
        sf = sf < INFINITY ? sf : INFINITY; /* ggml_clamp: MAX(MIN(x, max), min) */
        sf = sf > 6.103515625e-5f ? sf : 6.103515625e-5f;
        for (int64_t u = 0; u < U; u++) wr[u] = wr[u] / sf;
    }
    if (scale != 0.0f && scale != 1.0f) {
        for (int64_t u = 0; u < U; u++) wr[u] = wr[u] * scale;
    }
}

/* The whole op for rows m of km_part(M, ith, nth), with the provider's dot (logit e = dot(w + e*K, x + m*K, K)). */
typedef float (*km_router_dot)(const float *w, const float *x, int64_t K);

static inline void km_router_rows(km_router_dot dot, int32_t *ids, float *wts, const float *x, const float *w,
                                  int64_t M, int64_t E, int64_t U, int64_t K, int64_t norm, float scale, int ith,
                                  int nth) {
    int64_t lo, hi;
    km_part(M, ith, nth, &lo, &hi);
    float p[KM_ROUTER_EMAX]; /* [E] logits, then probabilities */
    for (int64_t m = lo; m < hi; m++) {
        for (int64_t e = 0; e < E; e++) p[e] = dot(w + e * K, x + m * K, K);
        km_router_select(ids + m * U, wts + m * U, p, E, U, norm, scale);
    }
}

#endif /* KM_MOE_ROUTER_SELECT_H */
