/* swiglu/ggml_exp8_f32_ref.c — km_swiglu_f32_ggml_exp8__ref: the scalar oracle of contract swiglu.f32.ggml_exp8.v1.
 *
 * Op: y = silu(gate) * up elementwise over f32 [M, F] (row-major; y may alias gate or up).
 * Numerics: llama.cpp's ggml_vec_swiglu_f32 as its x86 build without AVX-512 (AVX2 + FMA) computes each row of
 * F values: columns [0, F - F%8) take one lane of its 8-lane vector SiLU (km_ggml_expf.h km_ggml_v_silu8:
 * x / (1 + v_expf(0 - x)) with that build's exp, which adds the polynomial's 1 by fma(j, 2^n, 2^n) instead of
 * scaling (j + 1) as the AVX-512 build does; then one f32 multiply by up); the last F%8 columns take the scalar
 * path, x / (1 + expf(-x)) * up with libm expf. (swiglu.f32.ggml.v1 is the AVX-512 build: 16 lanes, another
 * exp.) Partition: the flat M*F range in 16-element chunks (km_part over chunks); elementwise, so every nth
 * gives the same bytes.
 */
#include <math.h>

#include "km_common.h"
#include "km_expf.h"
#include "km_ggml_expf.h"

void km_swiglu_f32_ggml_exp8__ref(float *y, const float *gate, const float *up, int64_t M, int64_t F, int ith,
                                  int nth) {
    int64_t c0, c1;
    km_part((M * F + 15) / 16, ith, nth, &c0, &c1);
    const int64_t hi = c1 * 16 < M * F ? c1 * 16 : M * F;
    const int64_t vec_end = F - F % 8; /* columns below this take the vector lane */
    for (int64_t i = c0 * 16; i < hi; i++) {
        const float x = gate[i];
        const float s = i % F < vec_end ? km_ggml_v_silu8(x) : x / (1.0f + km_expf(-x));
        y[i] = s * up[i];
    }
}
