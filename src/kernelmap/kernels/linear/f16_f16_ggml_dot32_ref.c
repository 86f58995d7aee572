/* linear/f16_f16_ggml_dot32_ref.c — km_linear_f16_f16_ggml_dot32__ref: the scalar oracle of
 * linear.f16.f16.ggml_dot32.v1.
 *
 * Op: as linear.f16.f16.ggml.v1 (f16_f16_ggml_ref.c): y[m][n] = sum_k w[n][k] * x[m][k]; w [N,K] f16 row-major,
 * x [M,K] f16 row-major (the activation converted by quantize_act.f16.v1), y [M,N] f32.
 * Numerics: llama.cpp's ggml_vec_dot_f16 as its x86 build *without AVX-512* computes it (GGML_AVX2 / FMA / F16C
 * on, GGML_AVX512 off: what llama.cpp builds for an AVX2-only CPU such as AMD Zen 3): the dot of
 * attention.f16kv.ggml_fa_dot32.v1 (km_fa_dot32_ref): np = K - K % 32; 32 f32 partials p[i % 32] =
 * fmaf(w[i], x[i], p[i % 32]) in increasing i < np; P[l] = (p[l] + p[16 + l]) + (p[8 + l] + p[24 + l]) (l < 8),
 * T[l] = P[l] + P[l + 4] (l < 4), r = (T0 + T1) + (T2 + T3); sum = (double) r, then for np <= i < K
 * sum += (double) (w[i] * x[i]); y = (float) sum.
 * Established on that build's own inputs and outputs (tests/fixtures/formats_avx2: the Gemma file requantized to
 * F16 by llama.cpp, its attn_q / attn_output / ffn_down / LM-head MUL_MATs, and ggml_vec_dot_f16 called directly
 * at K = 17 .. 1000; tests/kernels/test_ops_vs_llama_formats.py), where the AVX-512 build's order misses 4-7 of 8.
 * Partition: output columns n (km_part over N); results are identical for every (ith, nth) and M.
 */
#include "km_common.h"
#include "../attention/ggmlfa_dot_ref.h"

void km_linear_f16_f16_ggml_dot32__ref(float *y, const void *w, const void *x, int64_t M, int64_t N, int64_t K,
                                       int ith, int nth) {
    int64_t lo, hi;
    km_part(N, ith, nth, &lo, &hi);
    const km_half *wh = (const km_half *)w, *xh = (const km_half *)x;
    for (int64_t n = lo; n < hi; n++)
        for (int64_t m = 0; m < M; m++) y[m * N + n] = km_fa_dot32_ref(wh + n * K, xh + m * K, K);
}
