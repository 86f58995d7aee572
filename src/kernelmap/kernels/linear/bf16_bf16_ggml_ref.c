/* linear/bf16_bf16_ggml_ref.c — km_linear_bf16_bf16_ggml__ref: the scalar oracle of linear.bf16.bf16.ggml.v1.
 *
 * Op: y[m][n] = sum_k w[n][k] * x[m][k]; w [N,K] bf16 row-major, x [M,K] bf16 row-major (the activation
 * converted by quantize_act.bf16.v1, as llama.cpp converts it for a bf16 weight), y [M,N] f32.
 * Numerics (llama.cpp's ggml_vec_dot_bf16 in its x86 AVX-512 BF16 build, vdpbf16ps; every variant is
 * bit-exact with this file): np = K - K % 64; two 16-lane f32 accumulators c1, c2 = +0; for every step
 * i = 0, 64, ... < np, c1 takes elements [i, i + 32) and c2 [i + 32, i + 64): lane j of a 32-element group
 * g (elements g + 2j, g + 2j + 1) becomes R(R(c[j] + w[g+2j+1] * x[g+2j+1]) + w[g+2j] * x[g+2j]), each step
 * a fused multiply-add rounded to nearest even whose inputs (c[j] and the bf16 values) are flushed to zero
 * when subnormal (DAZ) and whose result is flushed to a signed zero when below 2^-126 in magnitude (FTZ).
 * reduce(c): h[l] = c[l] + c[l + 8] (l < 8), ((h0 + h4) + (h2 + h6)) + ((h1 + h5) + (h3 + h7)) in f32.
 * sum = 0.0 + (double) reduce(c1); sum = sum + (double) reduce(c2); tail: for np <= i < K, sum += (double)
 * f32(w[i] * x[i]); y = (float) sum.
 * Partition: output columns n (km_part over N); results are identical for every (ith, nth) and M.
 */
#include <math.h>

#include "km_common.h"

static float bf16(uint16_t h) {
    const uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Zero of the same sign for |v| < 2^-126 (DAZ on inputs, FTZ on results). */
static float flush(float v) { return fabsf(v) < 1.17549435e-38f ? copysignf(0.0f, v) : v; }

static float reduce16(const float c[16]) {
    float h[8];
    for (int l = 0; l < 8; l++) h[l] = c[l] + c[l + 8];
    return ((h[0] + h[4]) + (h[2] + h[6])) + ((h[1] + h[5]) + (h[3] + h[7]));
}

void km_linear_bf16_bf16_ggml__ref(float *y, const void *w, const void *x, int64_t M, int64_t N, int64_t K,
                                   int ith, int nth) {
    int64_t lo, hi;
    km_part(N, ith, nth, &lo, &hi);
    const uint16_t *wh = (const uint16_t *)w, *xh = (const uint16_t *)x;
    const int64_t np = K - K % 64;
    for (int64_t n = lo; n < hi; n++) {
        for (int64_t m = 0; m < M; m++) {
            const uint16_t *wr = wh + n * K, *xr = xh + m * K;
            float c[2][16];
            for (int l = 0; l < 16; l++) c[0][l] = c[1][l] = 0.0f;
            for (int64_t i = 0; i < np; i += 64)
                for (int a = 0; a < 2; a++)
                    for (int j = 0; j < 16; j++) {
                        const int64_t e = i + 32 * a + 2 * j;
                        float t = flush(fmaf(flush(bf16(wr[e + 1])), flush(bf16(xr[e + 1])), flush(c[a][j])));
                        c[a][j] = flush(fmaf(flush(bf16(wr[e])), flush(bf16(xr[e])), t));
                    }
            double sum = 0.0;
            sum += (double)reduce16(c[0]);
            sum += (double)reduce16(c[1]);
            for (int64_t i = np; i < K; i++) sum += (double)(bf16(wr[i]) * bf16(xr[i]));
            y[m * N + n] = (float)sum;
        }
    }
}
