/* fused/qk_norm_rope_body.h — the family body of qk_norm_rope.neox.f32.v1, written once against the lanes
 * interface (common/km_lanes.h); every ISA variant is an instantiation of it.
 *
 * Numerics: exactly fused/qk_norm_rope_neox_f32_ref.c — qk_norm.f32.v1 of each head
 * (common/km_rownorm.h: t = (x * s) * w[d], no FMA) into a stack buffer, then rope.neox.f32.v1 of t
 * (common/km_rope.h); bit-identical with the unfused pair. Op: x, y f32 [M, H*D] (y may alias x), weight
 * w [D] shared by all heads, row m at position pos + m; D even, D <= 512.
 * Partition: (row, head) items, km_part over M*H; the rope tables are fetched (krp_cache_memo: from the
 * thread's memo, or made) when the row changes.
 * No schedule parameters.
 */
#ifndef KM_QK_NORM_ROPE_BODY_H
#define KM_QK_NORM_ROPE_BODY_H

#include "km_rope.h"
#include "km_rownorm.h"

static inline void kqnr_qk_norm_rope_neox(float *y, const float *x, const float *w, int64_t M, int64_t H, int64_t D,
                                          int64_t pos, float eps, float freq_base, float freq_scale, int ith,
                                          int nth) {
    const float theta_scale = krp_theta_scale(freq_base, D);
    krp_tables t;         /* the current row's tables */
    float nrm[KRP_DMAX]; /* [D] the normalised head */
    int64_t lo, hi, row = -1;
    km_part(M * H, ith, nth, &lo, &hi);
    for (int64_t it = lo; it < hi; it++) { /* it: (row, head) item = row * H + head */
        if (it / H != row) {
            row = it / H;
            krp_cache_memo(&t, (float)(pos + row), freq_scale, theta_scale, D / 2, 0);
        }
        const float *xr = x + it * D; /* [D] */
        krn_scale_row(nrm, xr, w, krn_scale(krn_sumsq(xr, D), D, eps), D);
        krp_rotate(y + it * D, nrm, D, &t, 0);
    }
}

#endif /* KM_QK_NORM_ROPE_BODY_H */
