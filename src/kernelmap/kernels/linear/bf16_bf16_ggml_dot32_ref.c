/* linear/bf16_bf16_ggml_dot32_ref.c — km_linear_bf16_bf16_ggml_dot32__ref: the scalar oracle of
 * linear.bf16.bf16.ggml_dot32.v1.
 *
 * Op: as linear.bf16.bf16.ggml.v1 (bf16_bf16_ggml_ref.c): y[m][n] = sum_k w[n][k] * x[m][k]; w [N,K] bf16, x [M,K]
 * bf16 (the activation converted by quantize_act.bf16.v1), y [M,N] f32.
 * Numerics: llama.cpp's ggml_vec_dot_bf16 as its x86 build *without AVX-512* computes it (GGML_AVX2 / FMA on,
 * GGML_AVX512 off: no vdpbf16ps, no flushing): np = K - K % 32; 32 f32 partials p[i % 32] += w[i] * x[i] in
 * increasing i < np (the product of two bf16 is exact in f32, so this is fmaf); c[l] = (p[l] + p[16 + l]) +
 * (p[8 + l] + p[24 + l]) (l < 8), g[l] = c[l] + c[l + 4] (l < 4), r = (g0 + g2) + (g1 + g3); sum = (double) r,
 * then for np <= i < K sum += (double) (w[i] * x[i]); y = (float) sum.
 * Established on that build's own ggml_vec_dot_bf16 at K = 17, 64, 200, 640, 1000 and its MUL_MATs of the Gemma
 * file converted to BF16 (tests/fixtures/formats_avx2, tests/kernels/test_ops_vs_llama_formats.py).
 * Partition: output columns n (km_part over N); results are identical for every (ith, nth) and M.
 */
#include <math.h>
#include <string.h>

#include "km_common.h"

static float bf16_f32(uint16_t h) {
    const uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static float dot32_bf16(const uint16_t *w, const uint16_t *x, int64_t K) {
    float p[32] = {0.0f};
    const int64_t np = K - K % 32;
    for (int64_t i = 0; i < np; i++) p[i % 32] = fmaf(bf16_f32(w[i]), bf16_f32(x[i]), p[i % 32]);
    float c[8], g[4];
    for (int l = 0; l < 8; l++) c[l] = (p[l] + p[16 + l]) + (p[8 + l] + p[24 + l]);
    for (int l = 0; l < 4; l++) g[l] = c[l] + c[l + 4];
    double s = (double)((g[0] + g[2]) + (g[1] + g[3]));
    for (int64_t i = np; i < K; i++) s += (double)(bf16_f32(w[i]) * bf16_f32(x[i]));
    return (float)s;
}

void km_linear_bf16_bf16_ggml_dot32__ref(float *y, const void *w, const void *x, int64_t M, int64_t N, int64_t K,
                                         int ith, int nth) {
    int64_t lo, hi;
    km_part(N, ith, nth, &lo, &hi);
    const uint16_t *wh = (const uint16_t *)w, *xh = (const uint16_t *)x;
    for (int64_t n = lo; n < hi; n++)
        for (int64_t m = 0; m < M; m++) y[m * N + n] = dot32_bf16(wh + n * K, xh + m * K, K);
}
