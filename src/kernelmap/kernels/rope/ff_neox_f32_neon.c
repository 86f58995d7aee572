/* rope/ff_neox_f32_neon.c — km_rope_ff_neox_f32__neon: contract rope_ff.neox.f32.v1.
 *
 * An instantiation of the family body rope/rope_body.h with factors (byte-identical to km_rope_ff_neox_f32__ref for
 * every (ith, nth), and so to the other ISAs' instantiations, libm's cosf/sinf being the same) on
 * the AArch64 AdvSIMD lanes (4-lane q registers).
 */
#include "km_lanes_neon.h"
#include "rope_body.h"

void km_rope_ff_neox_f32__neon(float *y, const float *x, const float *f, int64_t M, int64_t H, int64_t D,
        int64_t pos, float freq_base, float freq_scale, int ith, int nth) {
    krope_rows_ff(y, x, f, M, H, D, pos, freq_base, freq_scale, ith, nth, 0);
}
