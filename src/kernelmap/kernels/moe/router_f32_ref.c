/* moe/router_f32_ref.c — km_moe_router_f32__ref: the scalar oracle of contract moe_router.f32.ggml.v1.
 *
 * Op: expert routing of a mixture-of-experts FFN, llama.cpp's build_moe_ffn with softmax gating, for
 * x f32 [M, K] (row-major) and the router weight w f32 [E, K]: per row m,
 *   logits[e] = dot(w[e], x[m])                         (ggml_vec_dot_f32, AVX-512 build)
 *   p = softmax(logits)                                 (ggml_soft_max, scale 1, no mask)
 *   ids[m][0..U) = the first U of argsort(p, descending) (ggml_argsort + view: std::sort)
 *   wts[m][u] = p[ids[m][u]], then when norm != 0: wts /= clamp(sum(wts), 6.103515625e-5, inf)
 *   and when scale is neither 0 nor 1: wts *= scale.
 * Outputs ids i32 [M, U] and wts f32 [M, U]. Constraints: K a multiple of 64, U <= E <= 512.
 * Numerics, each step as llama.cpp's x86 AVX-512 CPU build computes it:
 *   dot: 4 accumulators of 16 lanes, element i of each 64-block going to lane i%16 of accumulator
 *     (i%64)/16 by fmaf in increasing i; then a0 += a2, a1 += a3, a0 += a1 (lane-wise), and a0's lanes
 *     folded as gcc's _mm512_reduce_add_ps: h[l] = a[l] + a[l+8], q[l] = h[l] + h[l+4],
 *     (q0 + q2) + (q1 + q3).
 *   softmax: mx = max(p); for e < E - E%16, in blocks of 16: t = v_expf(logit - mx) (the 16-lane
 *     vector exp, km_ggml_expf.h), the block's lanes summed by the same reduce tree in f32 and added
 *     to a double sum; for the last E%16: t = expf(logit - mx) (libm) added to the double sum;
 *     then each t *= (float)(1.0 / sum) (double divide, rounded to float once).
 *   norm: s = (float)(double sum of wts in u order); s = max(min(s, inf), 6.103515625e-5);
 *     wts[u] = wts[u] / s; scale: wts[u] = wts[u] * scale (f32).
 * Ties in the argsort follow router_sort.h (libstdc++'s introsort, which is what llama.cpp runs).
 * Partition: rows m (km_part over M); each row is computed whole by one thread.
 */
#include <math.h>

#include "km_common.h"
#include "km_ggml_expf.h"
#include "router_sort.h"

#define KM_ROUTER_EMAX 512

/* gcc's _mm512_reduce_add_ps on 16 lanes */
static float reduce16(const float a[16]) {
    float h[8], q[4];
    for (int l = 0; l < 8; l++) h[l] = a[l + 8] + a[l];
    for (int l = 0; l < 4; l++) q[l] = h[l + 4] + h[l];
    return (q[0] + q[2]) + (q[1] + q[3]);
}

/* ggml_vec_dot_f32 (AVX-512): K a multiple of 64, so there is no scalar tail */
static float dot_f32(const float *w, const float *x, int64_t K) {
    float acc[4][16] = {{0}};
    for (int64_t i = 0; i < K; i += 64) {
        for (int j = 0; j < 4; j++) {
            for (int l = 0; l < 16; l++) acc[j][l] = fmaf(w[i + 16 * j + l], x[i + 16 * j + l], acc[j][l]);
        }
    }
    for (int l = 0; l < 16; l++) {
        acc[0][l] = acc[0][l] + acc[2][l];
        acc[1][l] = acc[1][l] + acc[3][l];
    }
    for (int l = 0; l < 16; l++) acc[0][l] = acc[0][l] + acc[1][l];
    return reduce16(acc[0]);
}

void km_moe_router_f32__ref(int32_t *ids, float *wts, const float *x, const float *w, int64_t M, int64_t E,
        int64_t U, int64_t K, int64_t norm, float scale, int ith, int nth) {
    int64_t lo, hi;
    km_part(M, ith, nth, &lo, &hi);
    float p[KM_ROUTER_EMAX];      /* [E] logits, then probabilities */
    int32_t idx[KM_ROUTER_EMAX];  /* [E] argsort */
    for (int64_t m = lo; m < hi; m++) {
        const float *xr = x + m * K;
        for (int64_t e = 0; e < E; e++) p[e] = dot_f32(w + e * K, xr, K);
        float mx = -INFINITY;
        for (int64_t e = 0; e < E; e++) mx = mx > p[e] ? mx : p[e]; /* ggml's MAX(max, x), NaN and -0 included */
        double sum = 0.0;
        const int64_t vec_end = E - E % 16;
        for (int64_t e0 = 0; e0 < vec_end; e0 += 16) {
            for (int l = 0; l < 16; l++) p[e0 + l] = km_ggml_v_expf(p[e0 + l] - mx);
            sum += (double)reduce16(p + e0);
        }
        for (int64_t e = vec_end; e < E; e++) {
            p[e] = expf(p[e] - mx);
            sum += (double)p[e];
        }
        const float inv = (float)(1.0 / sum);
        for (int64_t e = 0; e < E; e++) p[e] = p[e] * inv;
        km_argsort_desc(idx, p, E);
        int32_t *ir = ids + m * U;
        float *wr = wts + m * U;
        for (int64_t u = 0; u < U; u++) {
            ir[u] = idx[u];
            wr[u] = p[idx[u]];
        }
        if (norm) {
            double s = 0.0;
            for (int64_t u = 0; u < U; u++) s += (double)wr[u];
            float sf = (float)s;
            sf = sf < INFINITY ? sf : INFINITY;                /* ggml_clamp: MAX(MIN(x, max), min) */
            sf = sf > 6.103515625e-5f ? sf : 6.103515625e-5f;
            for (int64_t u = 0; u < U; u++) wr[u] = wr[u] / sf;
        }
        if (scale != 0.0f && scale != 1.0f) {
            for (int64_t u = 0; u < U; u++) wr[u] = wr[u] * scale;
        }
    }
}
