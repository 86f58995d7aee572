/* quantize/quantize_act_body.h — the family body of quantize_act.q8_0.rne.v1 and quantize_act.q8_k.v1,
 * written once against the lanes interface (common/km_lanes.h); every ISA variant of the two providers
 * is an instantiation of it.
 *
 * Numerics: exactly quantize/q8_0_rne_ref.c and quantize/q8_k_ref.c (the rules are in
 * common/km_actquant.h). Op: x f32 [M, K] row-major -> y [M, K / 32] q8_0 or [M, K / 256] q8_k blocks.
 * Partition: q8_0: the M * K / 32 blocks as one flat range; q8_k: rows (km_part over M), or the blocks of
 * the single row when M == 1. Blocks are independent, so every split gives the same bytes.
 * No schedule parameters.
 */
#ifndef KM_QUANTIZE_ACT_BODY_H
#define KM_QUANTIZE_ACT_BODY_H

#include "km_actquant.h"

static inline void kqa_quantize_q8_0_rne(void *y, const float *x, int64_t M, int64_t K, int ith, int nth) {
    int64_t lo, hi;
    km_part(M * (K / KM_QK8_0), ith, nth, &lo, &hi);
    km_block_q8_0 *yb = (km_block_q8_0 *)y;
    for (int64_t b = lo; b < hi; b++) kqa_q8_0_rne_at(&yb[b], x + b * KM_QK8_0);
}

static inline void kqa_quantize_q8_k(void *y, const float *x, int64_t M, int64_t K, int ith, int nth) {
    const int64_t nb = K / KM_QK_K;
    km_block_q8_k *out = (km_block_q8_k *)y;
    int64_t lo, hi;
    if (M == 1) {
        km_part(nb, ith, nth, &lo, &hi);
        for (int64_t b = lo; b < hi; b++) kqa_q8_k(&out[b], x + b * KM_QK_K);
        return;
    }
    km_part(M, ith, nth, &lo, &hi);
    for (int64_t m = lo; m < hi; m++)
        for (int64_t b = 0; b < nb; b++) kqa_q8_k(&out[m * nb + b], x + m * K + b * KM_QK_K);
}

#endif /* KM_QUANTIZE_ACT_BODY_H */
