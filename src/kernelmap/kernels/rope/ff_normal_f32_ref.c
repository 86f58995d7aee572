/* rope/ff_normal_f32_ref.c — km_rope_ff_normal_f32__ref: the scalar oracle of contract rope_ff.normal.f32.v1.
 *
 * Op and numerics: rope/rope_ff_ref.h with normal pairs (2i, 2i + 1): ggml's GGML_ROPE_TYPE_NORMAL
 * with a freq-factors tensor (llama.cpp's Llama 3 graph). D even, D <= 512.
 */
#include "rope_ff_ref.h"

void km_rope_ff_normal_f32__ref(float *y, const float *x, const float *f, int64_t M, int64_t H, int64_t D,
        int64_t pos, float freq_base, float freq_scale, int ith, int nth) {
    km_rope_ff_run(y, x, f, M, H, D, pos, freq_base, freq_scale, ith, nth, 1);
}
