/* kv_append/kv_append_body.h — the family body of kv_append.f16.v1 and kv_append.f32.v1, written once
 * against the lanes interface (common/km_lanes.h); every ISA variant of the two providers is an
 * instantiation of it.
 *
 * Numerics: exactly kv_append/f16_ref.c: cache[h][(pos + m) mod C][d] = f16(x[m][h*D + d]), rounded to nearest
 * even, overflow to inf (kl_fv_store_f16); a vector holding a NaN, and the run's last partial vector, are
 * converted by the ref's scalar km_fp32_to_fp16 (every NaN becomes the quiet NaN sign | 0x7E00).
 * f32 (kv_append/f32_ref.c): a copy of the f32 bits (kl_fv_loadu / kl_fv_storeu, the run's last partial
 * vector kl_fv_loadn / kl_fv_storen: no float operation, NaN payloads kept).
 * Op: x f32 [M, H*D] row-major into the head-major cache [H][C][D] (f16 or f32) at cells (pos .. pos + M - 1)
 * mod C (0 <= pos, M <= C; C >= every position: the full-length layout, smaller: a ring buffer).
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

KL_INLINE void kkv_run_f32(float *dst, const float *src, int64_t D) {
    int64_t d = 0;
    for (; d + KL_FV_LANES <= D; d += KL_FV_LANES) kl_fv_storeu(dst + d, kl_fv_loadu(src + d));
    if (d < D) kl_fv_storen(dst + d, kl_fv_loadn(src + d, (int)(D - d)), (int)(D - d));
}

/* (row, head) items it = m * H + h of thread ith: the D-long run of x row m, head h, into cache cell (pos + m) mod C. */
KL_INLINE void kkv_append(void *cache, const float *x, int64_t M, int64_t H, int64_t D, int64_t C, int64_t pos,
                           int ith, int nth, const int f32) {
    int64_t lo, hi;
    km_part(M * H, ith, nth, &lo, &hi);
    for (int64_t it = lo; it < hi; it++) {
        /* cache [H][C][D]; the ring layout: row j at cell j mod C */
        const int64_t m = it / H, h = it % H, at = (h * C + (pos + m) % C) * D;
        if (f32)
            kkv_run_f32((float *)cache + at, x + it * D, D);
        else
            kkv_run_f16((km_half *)cache + at, x + it * D, D);
    }
}

static inline void kkv_append_f16(void *cache, const float *x, int64_t M, int64_t H, int64_t D, int64_t C, int64_t pos,
                                  int ith, int nth) {
    kkv_append(cache, x, M, H, D, C, pos, ith, nth, 0);
}

static inline void kkv_append_f32(void *cache, const float *x, int64_t M, int64_t H, int64_t D, int64_t C, int64_t pos,
                                  int ith, int nth) {
    kkv_append(cache, x, M, H, D, C, pos, ith, nth, 1);
}

#endif /* KM_KV_APPEND_BODY_H */
