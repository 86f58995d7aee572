/* geglu/tanh_f32_neon.c — km_geglu_tanh_f32__neon: contract geglu.tanh.f32.v1.
 *
 * An instantiation of the family body geglu/geglu_body.h (byte-identical to km_geglu_tanh_f32__ref for
 * every (ith, nth), and so to the other ISAs' instantiations) on the AArch64 AdvSIMD lanes (4-lane q
 * registers).
 */
#include "km_lanes_neon.h"
#include "geglu_body.h"

void km_geglu_tanh_f32__neon(float *y, const float *gate, const float *up, int64_t M, int64_t F, int ith, int nth) {
    kgg_geglu_rows(y, gate, up, M, F, ith, nth);
}
