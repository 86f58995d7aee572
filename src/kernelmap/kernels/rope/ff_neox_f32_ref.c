/* rope/ff_neox_f32_ref.c — km_rope_ff_neox_f32__ref: the scalar oracle of contract rope_ff.neox.f32.v1.
 *
 * Op and numerics: rope/rope_ff_ref.h with NeoX pairs (i, i + D/2): ggml's GGML_ROPE_TYPE_NEOX with
 * a freq-factors tensor. D even, D <= 512.
 */
#include "rope_ff_ref.h"

void km_rope_ff_neox_f32__ref(float *y, const float *x, const float *f, int64_t M, int64_t H, int64_t D,
        int64_t pos, float freq_base, float freq_scale, int ith, int nth) {
    km_rope_ff_run(y, x, f, M, H, D, pos, freq_base, freq_scale, ith, nth, 0);
}
