/* swiglu/ggml_f32_ref.c — km_swiglu_f32_ggml__ref: the scalar oracle of contract swiglu.f32.ggml.v1.
 *
 * Op: y = silu(gate) * up elementwise over f32 [M, F] (row-major; y may alias gate or up).
 * Numerics: llama.cpp's x86 AVX-512 ggml_vec_swiglu_f32 applied to each row of F values: columns
 * [0, F - F%16) take one lane of the 16-lane vector SiLU (km_ggml_expf.h: x / (1 + v_expf(0 - x)),
 * then one f32 multiply by up); the last F%16 columns take the scalar path, x / (1 + expf(-x)) * up
 * with libm expf. Bit for bit llama.cpp's ffn_swiglu for a row length of F (llama.cpp calls the
 * vector routine once per row, so the split depends on the column, not on the flat index).
 * Partition: the flat M*F range in 16-element chunks (km_part over chunks); elementwise, so every nth
 * gives the same bytes.
 */
#include <math.h>

#include "km_common.h"
#include "km_expf.h"
#include "km_ggml_expf.h"

void km_swiglu_f32_ggml__ref(float *y, const float *gate, const float *up, int64_t M, int64_t F, int ith, int nth) {
    int64_t c0, c1;
    km_part((M * F + 15) / 16, ith, nth, &c0, &c1);
    const int64_t hi = c1 * 16 < M * F ? c1 * 16 : M * F;
    const int64_t vec_end = F - F % 16; /* columns below this take the vector lane */
    for (int64_t i = c0 * 16; i < hi; i++) {
        const float x = gate[i];
        const float s = i % F < vec_end ? km_ggml_v_silu(x) : x / (1.0f + km_expf(-x));
        y[i] = s * up[i];
    }
}
