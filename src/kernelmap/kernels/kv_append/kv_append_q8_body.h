/* kv_append/kv_append_q8_body.h — the family body of kv_append.q8_0.rne.v1, kv_append.q8_0.rot_k.v1 and
 * kv_append.q8_0.rot_v.v1, written once against the lanes interface (common/km_lanes.h); every ISA variant of the
 * three providers is an instantiation of it.
 *
 * Numerics: exactly kv_append/q8_0_ref.c: each (row, head) run of D values, rotated first for rot_k (blocks of the
 * largest power of two dividing D) and rot_v (blocks of 64) by common/km_fwht.h (= km_fwht_ref), is quantized in
 * blocks of 32 by the rule of quantize_act.q8_0.rne.v1 (common/km_actquant.h kqa_q8_0_rne_at, the lanes form of the
 * activation quantizer: d = fp16(amax/127), quants rint(x * 127/amax), halves to even).
 * Op: x f32 [M, H*D] into the head-major q8_0 cache [H][C][D/32 blocks] at cells (pos .. pos + M - 1) mod C.
 * D % 32 == 0 (plain) or D % 64 == 0 (rotated), D <= 512. Partition: (row, head) items, km_part over M*H. No
 * schedule parameters.
 */
#ifndef KM_KV_APPEND_Q8_BODY_H
#define KM_KV_APPEND_Q8_BODY_H

#include "km_actquant.h"
#include "km_fwht.h"

#define KKQ_DMAX 512

/* rot: 0 plain, else the rotation block */
KL_INLINE void kkq_append(void *cache, const float *x, int64_t M, int64_t H, int64_t D, int64_t C, int64_t pos,
                          int64_t rot, int ith, int nth) {
    km_block_q8_0 *kv = (km_block_q8_0 *)cache; /* [H][C][D/32] */
    const int64_t nb = D / KM_QK8_0;
    int64_t lo, hi;
    km_part(M * H, ith, nth, &lo, &hi);
    float r[KKQ_DMAX] __attribute__((aligned(64)));
    for (int64_t it = lo; it < hi; it++) {
        const int64_t m = it / H, h = it % H;
        km_block_q8_0 *dst = kv + (h * C + (pos + m) % C) * nb;
        const float *src = x + it * D;
        if (rot > 0) {
            for (int64_t b = 0; b < D; b += rot) kfw_fwht(r + b, src + b, rot);
            src = r;
        }
        for (int64_t b = 0; b < nb; b++) kqa_q8_0_rne_at(dst + b, src + b * KM_QK8_0);
    }
}

#endif /* KM_KV_APPEND_Q8_BODY_H */
