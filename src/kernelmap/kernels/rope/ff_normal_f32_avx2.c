/* rope/ff_normal_f32_avx2.c — km_rope_ff_normal_f32__avx2: contract rope_ff.normal.f32.v1.
 *
 * An instantiation of the family body rope/rope_body.h with factors (byte-identical to km_rope_ff_normal_f32__ref for
 * every (ith, nth), and so to the other ISAs' instantiations, libm's cosf/sinf being the same) on
 * the AVX2 lanes (8-lane ymm vectors).
 */
#include "km_lanes_avx2.h"
#include "rope_body.h"

void km_rope_ff_normal_f32__avx2(float *y, const float *x, const float *f, int64_t M, int64_t H, int64_t D,
        int64_t pos, float freq_base, float freq_scale, int ith, int nth) {
    krope_rows_ff(y, x, f, M, H, D, pos, freq_base, freq_scale, ith, nth, 1);
}
