/* linear/f32_f32_ggml_dot32_ref.c — km_linear_f32_f32_ggml_dot32__ref: the scalar oracle of
 * linear.f32.f32.ggml_dot32.v1.
 *
 * Op: as linear.f32.f32.ggml.v1 (f32_f32_ggml_ref.c): y[m][n] = sum_k w[n][k] * x[m][k], all f32 row-major.
 * Numerics: llama.cpp's ggml_vec_dot_f32 as its x86 build *without AVX-512* computes it (GGML_AVX2 / FMA on,
 * GGML_AVX512 off): np = K - K % 32; 32 f32 partials p[i % 32] = fmaf(w[i], x[i], p[i % 32]) in increasing i < np;
 * P[l] = (p[l] + p[16 + l]) + (p[8 + l] + p[24 + l]) (l < 8), T[l] = P[l] + P[l + 4] (l < 4),
 * s = (T0 + T1) + (T2 + T3) (two horizontal adds); the tail as that build's binary computes it: while 8 or more
 * elements remain, 8 rounded products w * x added to s one by one in f32; the last < 8 by fmaf.
 * Established on that build's own ggml_vec_dot_f32 at K = 17, 64, 200, 640, 1000 and its MUL_MATs of the Gemma
 * file converted to F32 (tests/fixtures/formats_avx2, tests/kernels/test_ops_vs_llama_formats.py).
 * Partition: output columns n (km_part over N); results are identical for every (ith, nth) and M.
 */
#include <math.h>

#include "km_common.h"

static float dot32_f32(const float *w, const float *x, int64_t K) {
    float p[32] = {0.0f};
    const int64_t np = K - K % 32;
    for (int64_t i = 0; i < np; i++) p[i % 32] = fmaf(w[i], x[i], p[i % 32]);
    float v[8], t[4];
    for (int l = 0; l < 8; l++) v[l] = (p[l] + p[16 + l]) + (p[8 + l] + p[24 + l]);
    for (int l = 0; l < 4; l++) t[l] = v[l] + v[l + 4];
    float s = (t[0] + t[1]) + (t[2] + t[3]);
    int64_t i = np;
    for (; K - i >= 8; i += 8)
        for (int j = 0; j < 8; j++) s = s + w[i + j] * x[i + j];
    for (; i < K; i++) s = fmaf(w[i], x[i], s);
    return s;
}

void km_linear_f32_f32_ggml_dot32__ref(float *y, const void *w, const void *x, int64_t M, int64_t N, int64_t K,
                                       int ith, int nth) {
    int64_t lo, hi;
    km_part(N, ith, nth, &lo, &hi);
    const float *wf = (const float *)w, *xf = (const float *)x;
    for (int64_t n = lo; n < hi; n++)
        for (int64_t m = 0; m < M; m++) y[m * N + n] = dot32_f32(wf + n * K, xf + m * K, K);
}
