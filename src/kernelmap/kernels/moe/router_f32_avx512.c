/* moe/router_f32_avx512.c — km_moe_router_f32__avx512: contract moe_router.f32.ggml.v1.
 *
 * An instantiation of the family body moe/router_body.h (byte-identical to km_moe_router_f32__ref for every
 * (ith, nth), and so to the other ISAs' instantiations) on the AVX-512 F/BW/VL/DQ lanes (16-lane zmm vectors).
 */
#include "km_lanes_avx512.h"
#include "router_body.h"

void km_moe_router_f32__avx512(int32_t *ids, float *wts, const float *x, const float *w, int64_t M, int64_t E,
        int64_t U, int64_t K, int64_t norm, float scale, int ith, int nth) {
    km_router_rows(krt_dot, ids, wts, x, w, M, E, U, K, norm, scale, ith, nth);
}
