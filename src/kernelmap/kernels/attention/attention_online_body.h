/* attention/attention_online_body.h — the family body of attention.f16kv.f32.v1 and attention.f32kv.f32.v1
 * (the online-softmax attention of attention/{f16kv,f32kv}_ref.c), written once against the lanes interface
 * (common/km_lanes.h); every ISA variant of the two providers is an instantiation of it.
 *
 * Op: causal GQA attention of q f32 [M, Hq*D] (row m at position p = pos + m) over the head-major caches
 * k_cache, v_cache [Hkv][C][D] (f16 when KATT_KV_F16 is 1, else f32); output y f32 [M, Hq*D]. Query head h
 * reads KV head h / (Hq/Hkv); row m sees keys j <= p and, when window > 0, p - j < window.
 * Constraints: D a multiple of 16, D <= 512, Hq a multiple of Hkv.
 * Numerics: the refs' order (32 dot partials by i mod 32 with FMA, folded p[t] += p[t + 16], + 8, + 4, + 2,
 * + 1; chunks of 32 keys; online softmax; L summed in key order; acc = fma(w, v, acc) in key order; y = acc *
 * (1/L)) with one difference from the refs, the exp: common/km_vexp.h's kvx_exp, a vector polynomial within
 * 2 ulp of expf. Every lane op is one IEEE operation (kl_fv_*), the partials of a dot are KL_FV_LANES-wide vectors
 * whose fold goes by vector adds down to one vector, then kl_fv_fold_halves: so every instantiation (any
 * KL_FV_LANES, x86 or ARM) gives the same bytes. The refs use libm expf, hence the maps' rtol/atol.
 * Schedule parameters (defined by the instantiating file before the include):
 *   KATT_KV_F16   1: the caches hold IEEE halves (widened exactly); 0: f32
 *   KATT_GMAX     2 or 4: the query heads of one KV head inside a thread's slice attended together (they share
 *                 each K/V load)
 * Partition: (row, head) items it = m*Hq + h, km_part over M*Hq.
 */
#ifndef KM_ATTENTION_ONLINE_BODY_H
#define KM_ATTENTION_ONLINE_BODY_H

#include <math.h>
#include <string.h>

#include "km_lanes.h"
#include "km_vexp.h"

#define KATT_CHUNK 32
#define KATT_DMAX 512
#define KATT_NV (32 / KL_FV_LANES) /* vectors of dot partials */

#if KATT_KV_F16
typedef km_half katt_kv_t;
KL_INLINE kl_fv katt_load(const katt_kv_t *p) { return kl_fv_load_f16(p); }
#else
typedef float katt_kv_t;
KL_INLINE kl_fv katt_load(const katt_kv_t *p) { return kl_fv_loadu(p); }
#endif

KL_INLINE float katt_sexp(float x) {
    float t[KL_FV_LANES];
    kl_fv_storeu(t, kvx_exp(kl_fv_set1(x)));
    return t[0];
}

/* The contract's fold of 32 partials (vector v holds i mod 32 in v*W .. v*W + W-1): + 16, + 8, ..., + 1. */
KL_INLINE float katt_fold(const kl_fv *a) {
    kl_fv t[KATT_NV / 2]; /* a copy, not an in-place fold: keeps the caller's accumulators in registers */
    for (int v = 0; v < KATT_NV / 2; v++) t[v] = kl_fv_add(a[v], a[v + KATT_NV / 2]);
    for (int s = KATT_NV / 4; s >= 1; s /= 2)
        for (int v = 0; v < s; v++) t[v] = kl_fv_add(t[v], t[v + s]);
    return kl_fv_fold_halves(t[0]);
}

/* out[g] = scale * dot(q + g*D, k) for G heads sharing one key row k [D]. */
KL_INLINE void katt_dots(const int G, const float *q, const katt_kv_t *k, int64_t D, float scale, float *out) {
    kl_fv a[KATT_GMAX][KATT_NV];
    for (int g = 0; g < G; g++)
        for (int v = 0; v < KATT_NV; v++) a[g][v] = kl_fv_zero();
    int64_t i = 0;
    for (; i + 32 <= D; i += 32) {
        kl_fv kv[KATT_NV];
        for (int v = 0; v < KATT_NV; v++) kv[v] = katt_load(k + i + v * KL_FV_LANES);
        for (int g = 0; g < G; g++)
            for (int v = 0; v < KATT_NV; v++)
                a[g][v] = kl_fv_fma(kl_fv_loadu(q + g * D + i + v * KL_FV_LANES), kv[v], a[g][v]);
    }
    if (i < D) { /* D % 32 == 16: partials 0..15 */
        kl_fv kv[16 / KL_FV_LANES];
        for (int v = 0; v < 16 / KL_FV_LANES; v++) kv[v] = katt_load(k + i + v * KL_FV_LANES);
        for (int g = 0; g < G; g++)
            for (int v = 0; v < 16 / KL_FV_LANES; v++)
                a[g][v] = kl_fv_fma(kl_fv_loadu(q + g * D + i + v * KL_FV_LANES), kv[v], a[g][v]);
    }
    for (int g = 0; g < G; g++) out[g] = scale * katt_fold(a[g]);
}

/* acc[g][d] = fma(w[g][t], v_t[d], acc[g][d]) for keys t in order, KL_FV_LANES values of d at a time. */
KL_INLINE void katt_accumulate(const int G, float (*acc)[KATT_DMAX], float (*w)[KATT_CHUNK], const katt_kv_t *v,
                               int64_t n, int64_t D) {
    for (int64_t d = 0; d < D; d += KL_FV_LANES) {
        kl_fv va[KATT_GMAX];
        for (int g = 0; g < G; g++) va[g] = kl_fv_loadu(acc[g] + d);
        for (int64_t t = 0; t < n; t++) {
            const kl_fv vv = katt_load(v + t * D + d);
            for (int g = 0; g < G; g++) va[g] = kl_fv_fma(kl_fv_set1(w[g][t]), vv, va[g]);
        }
        for (int g = 0; g < G; g++) kl_fv_storeu(acc[g] + d, va[g]);
    }
}

KL_INLINE void katt_weights(float *wrow, const float *srow, float mx) {
    for (int t = 0; t < KATT_CHUNK; t += KL_FV_LANES)
        kl_fv_storeu(wrow + t, kvx_exp(kl_fv_sub(kl_fv_loadu(srow + t), kl_fv_set1(mx))));
}

KL_INLINE void katt_scale(float *dst, const float *a, int64_t D, float f) {
    for (int64_t d = 0; d < D; d += KL_FV_LANES) kl_fv_storeu(dst + d, kl_fv_mul(kl_fv_loadu(a + d), kl_fv_set1(f)));
}

/* G consecutive query heads of one row (q, y: [G][D]) against KV head rows k, v [C][D], keys j0..p. */
KL_INLINE void katt_attend(const int G, float *y, const float *q, const katt_kv_t *k, const katt_kv_t *v, int64_t D,
                           int64_t j0, int64_t p, float scale) {
    float acc[KATT_GMAX][KATT_DMAX];
    float s[KATT_GMAX][KATT_CHUNK], w[KATT_GMAX][KATT_CHUNK];
    float run_max[KATT_GMAX], run_sum[KATT_GMAX];
    for (int g = 0; g < G; g++) {
        memset(acc[g], 0, (size_t)D * sizeof(float));
        run_max[g] = -INFINITY;
        run_sum[g] = 0.0f;
    }
    int first = 1;
    for (int64_t jc = j0; jc <= p; jc += KATT_CHUNK) {
        const int64_t n = (p + 1 - jc) < KATT_CHUNK ? (p + 1 - jc) : KATT_CHUNK;
        for (int64_t t = 0; t < n; t++) {
            float o[KATT_GMAX];
            katt_dots(G, q, k + (jc + t) * D, D, scale, o);
            for (int g = 0; g < G; g++) s[g][t] = o[g];
        }
        for (int g = 0; g < G; g++) {
            for (int64_t t = n; t < KATT_CHUNK; t++) s[g][t] = -INFINITY;
            float cm = -INFINITY;
            for (int64_t t = 0; t < n; t++) {
                if (s[g][t] > cm) cm = s[g][t];
            }
            if (first) {
                run_max[g] = cm;
            } else if (cm > run_max[g]) {
                const float f = katt_sexp(run_max[g] - cm);
                run_sum[g] *= f;
                katt_scale(acc[g], acc[g], D, f);
                run_max[g] = cm;
            }
            katt_weights(w[g], s[g], run_max[g]);
            for (int64_t t = 0; t < n; t++) run_sum[g] += w[g][t];
        }
        first = 0;
        katt_accumulate(G, acc, w, v + jc * D, n, D);
    }
    for (int g = 0; g < G; g++) katt_scale(y + g * D, acc[g], D, 1.0f / run_sum[g]);
}

/* Thread ith's share of the (row, head) items of one attention call. */
static void katt_run(float *y, const float *q, const void *k_cache, const void *v_cache, int64_t M, int64_t Hq,
                     int64_t Hkv, int64_t D, int64_t C, int64_t pos, float scale, int64_t window, int ith, int nth) {
    const katt_kv_t *kc = (const katt_kv_t *)k_cache; /* [Hkv][C][D] */
    const katt_kv_t *vc = (const katt_kv_t *)v_cache; /* [Hkv][C][D] */
    const int64_t group = Hq / Hkv;
    int64_t lo, hi;
    km_part(M * Hq, ith, nth, &lo, &hi);
    for (int64_t it = lo; it < hi;) {
        const int64_t m = it / Hq, h = it % Hq, kvh = h / group;
        int64_t end = m * Hq + (kvh + 1) * group; /* first item of the next KV head or row */
        if (end > hi) end = hi;
        if (end - it > KATT_GMAX) end = it + KATT_GMAX;
        const int64_t p = pos + m;
        const int64_t j0 = (window > 0 && p - window + 1 > 0) ? p - window + 1 : 0;
        const katt_kv_t *kr = kc + kvh * C * D, *vr = vc + kvh * C * D;
        switch (end - it) {
            case 1: katt_attend(1, y + it * D, q + it * D, kr, vr, D, j0, p, scale); break;
#if KATT_GMAX >= 4
            case 2: katt_attend(2, y + it * D, q + it * D, kr, vr, D, j0, p, scale); break;
            case 3: katt_attend(3, y + it * D, q + it * D, kr, vr, D, j0, p, scale); break;
#endif
            default: katt_attend(KATT_GMAX, y + it * D, q + it * D, kr, vr, D, j0, p, scale); break;
        }
        it = end;
    }
}

#endif /* KM_ATTENTION_ONLINE_BODY_H */
