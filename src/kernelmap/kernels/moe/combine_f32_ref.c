/* moe/combine_f32_ref.c — km_moe_combine_f32__ref: the scalar oracle of contract moe_combine.f32.v1.
 *
 * Op: the weighted sum of the selected experts' outputs, x f32 [M, U*N] (row m holds the U expert rows
 * of N values in slot order) and wts f32 [M, U]: y[m][n] = ((x0*w0 + x1*w1) + x2*w2) + ..., i.e.
 * llama.cpp's ggml_mul(experts, weights) (one f32 multiply per element) followed by its chain of
 * ggml_add over the slots in order 0..U-1; every product and sum rounds to f32 on its own (no FMA).
 * y [M, N] f32 row-major. Partition: the flat M*N range in 16-element chunks; elementwise over (m, n),
 * so every nth gives the same bytes.
 */
#include "km_common.h"

void km_moe_combine_f32__ref(float *y, const float *x, const float *wts, int64_t M, int64_t U, int64_t N,
        int ith, int nth) {
    int64_t c0, c1;
    km_part((M * N + 15) / 16, ith, nth, &c0, &c1);
    const int64_t hi = c1 * 16 < M * N ? c1 * 16 : M * N;
    for (int64_t i = c0 * 16; i < hi; i++) {
        const int64_t m = i / N, n = i % N;
        const float *xr = x + m * U * N + n;
        const float *wr = wts + m * U;
        float acc = xr[0] * wr[0];
        for (int64_t u = 1; u < U; u++) acc = acc + xr[u * N] * wr[u];
        y[i] = acc;
    }
}
