/* bias/add_f32_ref.c — km_bias_add_f32__ref: the scalar oracle of contract bias_add.f32.v1.
 *
 * Op: y[m][n] = x[m][n] + b[n] over f32 x [M, N] (row-major; y may alias x) and the f32 bias b [N]
 * (a weight). One IEEE f32 add per element, as llama.cpp's ggml_add broadcasting a bias row, so any
 * variant is bit-exact. Partition: the flat M*N range in 16-element chunks (km_part over chunks);
 * elementwise, so every nth gives the same bytes.
 */
#include "km_common.h"

void km_bias_add_f32__ref(float *y, const float *x, const float *b, int64_t M, int64_t N, int ith, int nth) {
    int64_t c0, c1;
    km_part((M * N + 15) / 16, ith, nth, &c0, &c1);
    const int64_t hi = c1 * 16 < M * N ? c1 * 16 : M * N;
    for (int64_t i = c0 * 16; i < hi; i++) y[i] = x[i] + b[i % N];
}
