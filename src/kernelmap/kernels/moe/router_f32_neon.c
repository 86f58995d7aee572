/* moe/router_f32_neon.c — km_moe_router_f32__neon: contract moe_router.f32.ggml.v1.
 *
 * An instantiation of the family body moe/router_body.h (byte-identical to km_moe_router_f32__ref for every
 * (ith, nth), and so to the other ISAs' instantiations) on the AArch64 AdvSIMD lanes (4-lane q registers).
 */
#include "km_lanes_neon.h"
#include "router_body.h"

void km_moe_router_f32__neon(int32_t *ids, float *wts, const float *x, const float *w, int64_t M, int64_t E,
        int64_t U, int64_t K, int64_t norm, float scale, int ith, int nth) {
    km_router_rows(krt_dot, ids, wts, x, w, M, E, U, K, norm, scale, ith, nth);
}
