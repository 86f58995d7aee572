/* moe/router_dot32_ref.c — km_moe_router_f32_ggml_dot32__ref: the scalar oracle of contract moe_router.f32.ggml_dot32.v1.
 *
 * Op: as moe_router.f32.ggml.v1 (moe/router_f32_ref.c: logits, ggml_soft_max, argsort, the first U, norm and
 * scale), each step as llama.cpp's x86 build *without AVX-512* (its AVX2 build) computes it:
 *   dot: ggml_vec_dot_f32 on 8-float lanes: 32 partials p[i % 32] = fmaf(w[i], x[i], p[i % 32]) in increasing i,
 *     P[l] = (p[l] + p[16 + l]) + (p[8 + l] + p[24 + l]), T[l] = P[l] + P[l + 4], (T0 + T1) + (T2 + T3) (the
 *     order of linear.f32.f32.ggml_dot32.v1; K a multiple of 64, so no tail);
 *   softmax: blocks of 8 experts below E - E%8 take that build's 8-lane exp (km_ggml_v_expf8) and add their lanes
 *     as h[l] = t[l+4] + t[l], (h0 + h2) + (h1 + h3) in f32 to the double sum; the last E%8 libm expf;
 *   top-U, norm and scale: moe/router_select.h (the same steps in both builds).
 * Partition: rows m (km_part over M); each row is computed whole by one thread.
 */
#include <math.h>

#include "km_common.h"
#include "km_ggml_expf.h"

#define KRS_VW 8
#define KRS_VEXPF km_ggml_v_expf8
#define KRS_VSUM km_router_reduce8
#include "router_select.h"

static float dot32_f32(const float *w, const float *x, int64_t K) {
    float p[32] = {0.0f};
    for (int64_t i = 0; i < K; i++) p[i % 32] = fmaf(w[i], x[i], p[i % 32]);
    float v[8], t[4];
    for (int l = 0; l < 8; l++) v[l] = (p[l] + p[16 + l]) + (p[8 + l] + p[24 + l]);
    for (int l = 0; l < 4; l++) t[l] = v[l] + v[l + 4];
    return (t[0] + t[1]) + (t[2] + t[3]);
}

void km_moe_router_f32_ggml_dot32__ref(int32_t *ids, float *wts, const float *x, const float *w, int64_t M, int64_t E,
        int64_t U, int64_t K, int64_t norm, float scale, int ith, int nth) {
    km_router_rows(dot32_f32, ids, wts, x, w, M, E, U, K, norm, scale, ith, nth);
}
