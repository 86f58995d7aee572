/* moe/router_dot32_avx2.c — km_moe_router_f32_ggml_dot32__avx2: contract moe_router.f32.ggml_dot32.v1.
 *
 * The logit dot on AVX2 + FMA: four ymm accumulators (partial i % 32 = lane i % 8 of accumulator (i % 32) / 8),
 * one fma per 8 elements in increasing i, then the contract's fold ((a0 + a2) + (a1 + a3) lane-wise, l + 4,
 * (T0 + T1) + (T2 + T3)) in scalar f32; softmax, top-U, norm and scale are the ref's own steps
 * (moe/router_select.h with this contract's parameters). Byte-identical to km_moe_router_f32_ggml_dot32__ref for every
 * (ith, nth). K a multiple of 64.
 */
#include <immintrin.h>
#include <math.h>

#include "km_common.h"
#include "km_ggml_expf.h"

#define KRS_VW 8
#define KRS_VEXPF km_ggml_v_expf8
#define KRS_VSUM km_router_reduce8
#include "router_select.h"

static float dot32_avx2(const float *w, const float *x, int64_t K) {
    __m256 a[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int64_t i = 0; i < K; i += 32)
        for (int j = 0; j < 4; j++)
            a[j] = _mm256_fmadd_ps(_mm256_loadu_ps(w + i + 8 * j), _mm256_loadu_ps(x + i + 8 * j), a[j]);
    float v[8], t[4];
    _mm256_storeu_ps(v, _mm256_add_ps(_mm256_add_ps(a[0], a[2]), _mm256_add_ps(a[1], a[3])));
    for (int l = 0; l < 4; l++) t[l] = v[l] + v[l + 4];
    return (t[0] + t[1]) + (t[2] + t[3]);
}

void km_moe_router_f32_ggml_dot32__avx2(int32_t *ids, float *wts, const float *x, const float *w, int64_t M, int64_t E,
        int64_t U, int64_t K, int64_t norm, float scale, int ith, int nth) {
    km_router_rows(dot32_avx2, ids, wts, x, w, M, E, U, K, norm, scale, ith, nth);
}
