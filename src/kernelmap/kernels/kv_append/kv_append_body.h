/* kv_append/kv_append_body.h — the family body of kv_append.f16.v1, written once against the lanes
 * interface (common/km_lanes.h); every ISA variant is an instantiation of it.
 *
 * Numerics: exactly kv_append/f16_ref.c: cache[h][(pos + m) mod C][d] = f16(x[m][h*D + d]), rounded to nearest
 * even, overflow to inf (kl_fv_store_f16); a vector holding a NaN, and the run's last partial vector, are
 * converted by the ref's scalar km_fp32_to_fp16 (every NaN becomes the quiet NaN sign | 0x7E00).
 * Op: x f32 [M, H*D] row-major into the head-major f16 cache [H][C][D] at cells (pos .. pos + M - 1) mod C
 * (0 <= pos, M <= C; C >= every position: the full-length layout, smaller: a ring buffer).
 * Partition: (row, head) items, km_part over M*H (each item one D-long run). No schedule parameters.
 */
#ifndef KM_KV_APPEND_BODY_H
#define KM_KV_APPEND_BODY_H

#include "km_lanes.h"

KL_INLINE void kkv_run_f16(km_half *dst, const float *src, int64_t D) {
    int64_t d = 0;
    for (; d + KL_FV_LANES <= D; d += KL_FV_LANES) {
        const kl_fv v = kl_fv_loadu(src + d);
        if (kl_fvm_bits(kl_fv_isnan(v))) {
            for (int j = 0; j < KL_FV_LANES; j++) dst[d + j] = km_fp32_to_fp16(src[d + j]);
        } else {
            kl_fv_store_f16(dst + d, v);
        }
    }
    for (; d < D; d++) dst[d] = km_fp32_to_fp16(src[d]);
}

static inline void kkv_append_f16(void *cache, const float *x, int64_t M, int64_t H, int64_t D, int64_t C, int64_t pos,
                                  int ith, int nth) {
    km_half *kv = (km_half *)cache; /* [H][C][D] */
    int64_t lo, hi;
    km_part(M * H, ith, nth, &lo, &hi);
    for (int64_t it = lo; it < hi; it++) { /* it = m * H + h */
        const int64_t m = it / H, h = it % H;
        kkv_run_f16(kv + (h * C + (pos + m) % C) * D, x + it * D, D); /* the ring layout: row j at cell j mod C */
    }
}

#endif /* KM_KV_APPEND_BODY_H */
