/* linear/f16_f16_ggml_ref.c — km_linear_f16_f16_ggml__ref: the scalar oracle of linear.f16.f16.ggml.v1.
 *
 * Op: y[m][n] = sum_k w[n][k] * x[m][k]; w [N,K] f16 row-major (IEEE halves), x [M,K] f16 row-major (the
 * activation converted by quantize_act.f16.v1, as llama.cpp converts it for an f16 weight), y [M,N] f32.
 * Numerics (llama.cpp's ggml_vec_dot_f16 in its x86 AVX-512 build; every variant is bit-exact with this
 * file): np = K - K % 64; 64 f32 lanes p[0..63] = +0; for i < np in order, p[i % 64] = fmaf(w[i], x[i],
 * p[i % 64]) (halves converted exactly). Reduce: v[l] = (p[l] + p[32 + l]) + (p[16 + l] + p[48 + l]) for
 * l < 16 (the four 16-lane accumulators s0..s3 as (s0 + s2) + (s1 + s3)); h[l] = v[l] + v[l + 8] (l < 8);
 * r = ((h0 + h4) + (h2 + h6)) + ((h1 + h5) + (h3 + h7)), each an f32 add. Tail: sum = (double) r, then for
 * np <= i < K sum += (double) (w[i] * x[i]) (the f32 product of two halves is exact); y = (float) sum.
 * Partition: output columns n (km_part over N); results are identical for every (ith, nth) and M.
 */
#include <math.h>

#include "km_common.h"

void km_linear_f16_f16_ggml__ref(float *y, const void *w, const void *x, int64_t M, int64_t N, int64_t K, int ith,
                                 int nth) {
    int64_t lo, hi;
    km_part(N, ith, nth, &lo, &hi);
    const km_half *wh = (const km_half *)w, *xh = (const km_half *)x;
    const int64_t np = K - K % 64;
    for (int64_t n = lo; n < hi; n++) {
        for (int64_t m = 0; m < M; m++) {
            const km_half *wr = wh + n * K, *xr = xh + m * K;
            float p[64];
            for (int l = 0; l < 64; l++) p[l] = 0.0f;
            for (int64_t i = 0; i < np; i++)
                p[i % 64] = fmaf(km_fp16_to_fp32(wr[i]), km_fp16_to_fp32(xr[i]), p[i % 64]);
            float v[16], h[8];
            for (int l = 0; l < 16; l++) v[l] = (p[l] + p[32 + l]) + (p[16 + l] + p[48 + l]);
            for (int l = 0; l < 8; l++) h[l] = v[l] + v[l + 8];
            const float r = ((h[0] + h[4]) + (h[2] + h[6])) + ((h[1] + h[5]) + (h[3] + h[7]));
            double sum = (double)r;
            for (int64_t i = np; i < K; i++) sum += (double)(km_fp16_to_fp32(wr[i]) * km_fp16_to_fp32(xr[i]));
            y[m * N + n] = (float)sum;
        }
    }
}
