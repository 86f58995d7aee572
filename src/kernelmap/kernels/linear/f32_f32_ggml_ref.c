/* linear/f32_f32_ggml_ref.c — km_linear_f32_f32_ggml__ref: the scalar oracle of linear.f32.f32.ggml.v1.
 *
 * Op: y[m][n] = sum_k w[n][k] * x[m][k]; w [N,K] f32 row-major, x [M,K] f32 row-major, y [M,N] f32.
 * Numerics (llama.cpp's ggml_vec_dot_f32 in its x86 AVX-512 build, as the peer's binary compiles it; every
 * variant is bit-exact with this file): np = K - K % 64; 64 f32 lanes p[0..63] = +0; for i < np in order,
 * p[i % 64] = fmaf(w[i], x[i], p[i % 64]). Reduce: v[l] = (p[l] + p[32 + l]) + (p[16 + l] + p[48 + l]) for
 * l < 16; h[l] = v[l] + v[l + 8] (l < 8); s = ((h0 + h4) + (h2 + h6)) + ((h1 + h5) + (h3 + h7)), each an f32
 * add. Tail (GCC's vectorization of the scalar leftover loop in the peer's binary): while 16 or more
 * elements remain, s = s + f32(w[i] * x[i]) for 16 elements in order; then, if 8 or more remain, the same
 * for 8; the last (fewer than 8) elements s = fmaf(w[i], x[i], s). y = s.
 * Partition: output columns n (km_part over N); results are identical for every (ith, nth) and M.
 */
#include <math.h>

#include "km_common.h"

void km_linear_f32_f32_ggml__ref(float *y, const void *w, const void *x, int64_t M, int64_t N, int64_t K, int ith,
                                 int nth) {
    int64_t lo, hi;
    km_part(N, ith, nth, &lo, &hi);
    const float *wf = (const float *)w, *xf = (const float *)x;
    const int64_t np = K - K % 64;
    for (int64_t n = lo; n < hi; n++) {
        for (int64_t m = 0; m < M; m++) {
            const float *wr = wf + n * K, *xr = xf + m * K;
            float p[64];
            for (int l = 0; l < 64; l++) p[l] = 0.0f;
            for (int64_t i = 0; i < np; i++) p[i % 64] = fmaf(wr[i], xr[i], p[i % 64]);
            float v[16], h[8];
            for (int l = 0; l < 16; l++) v[l] = (p[l] + p[32 + l]) + (p[16 + l] + p[48 + l]);
            for (int l = 0; l < 8; l++) h[l] = v[l] + v[l + 8];
            float s = ((h[0] + h[4]) + (h[2] + h[6])) + ((h[1] + h[5]) + (h[3] + h[7]));
            int64_t i = np;
            for (; K - i >= 16; i += 16)
                for (int j = 0; j < 16; j++) {
                    const float prod = wr[i + j] * xr[i + j];
                    s = s + prod;
                }
            if (K - i >= 8) {
                for (int j = 0; j < 8; j++) {
                    const float prod = wr[i + j] * xr[i + j];
                    s = s + prod;
                }
                i += 8;
            }
            for (; i < K; i++) s = fmaf(wr[i], xr[i], s);
            y[m * N + n] = s;
        }
    }
}
