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
 *   softmax, top-U, norm and scale: moe/router_select.h (shared with the SIMD variants, which differ
 *     only in the dot).
 * Ties in the argsort follow router_sort.h (libstdc++'s introsort, which is what llama.cpp runs).
 * Partition: rows m (km_part over M); each row is computed whole by one thread.
 */
#include <math.h>

#include "km_common.h"
#include "router_select.h"

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
    return km_router_reduce16(acc[0]);
}

void km_moe_router_f32__ref(int32_t *ids, float *wts, const float *x, const float *w, int64_t M, int64_t E,
        int64_t U, int64_t K, int64_t norm, float scale, int ith, int nth) {
    km_router_rows(dot_f32, ids, wts, x, w, M, E, U, K, norm, scale, ith, nth);
}
