/* quantize/quantize_act_body.h — the family body of quantize_act.q8_0.rne.v1, quantize_act.q8_k.v1 and
 * quantize_act.q8_0.v1, written once against the lanes interface (common/km_lanes.h); every ISA variant of
 * the three providers is an instantiation of it.
 *
 * Numerics: exactly quantize/q8_0_rne_ref.c and quantize/q8_k_ref.c (the rules are in
 * common/km_actquant.h), and quantize/q8_0_ref.c (kqa_q8_0_away below: id = 1/d, roundf's halves away from
 * zero). Op: x f32 [M, K] row-major -> y [M, K / 32] q8_0 or [M, K / 256] q8_k blocks.
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

/* quantize_act.q8_0.v1 (llama.cpp's quantize_row_q8_0_ref): amax = max |x| (exact in any order);
 * d = amax / 127.0f; id = d != 0 ? 1.0f / d : 0; q = roundf(x * id), halves away from zero (kl_fv_round_away,
 * exact), stored as int8 (already integers: the store's rounding changes nothing). |x * id| < 127.5, so nothing
 * saturates. Inputs must be finite. */
KL_INLINE void kqa_q8_0_away_at(km_block_q8_0 *q, const float *x) {
    kl_fv h[KQA_V32];
    for (int j = 0; j < KQA_V32; j++) h[j] = kl_fv_loadu(x + j * KL_FV_LANES);
    kl_fv m[KQA_V32]; /* a max tree (any order gives the same bits; the tree is shorter) */
    for (int j = 0; j < KQA_V32; j++) m[j] = kl_fv_abs(h[j]);
    for (int w = KQA_V32 / 2; w >= 1; w /= 2)
        for (int j = 0; j < w; j++) m[j] = kl_fv_max(m[j], m[j + w]);
    const float amax = kl_fv_hmax(m[0]);
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    q->d = km_fp32_to_fp16(d);
    const kl_fv vid = kl_fv_set1(id);
    kl_fv v[KQA_V32];
    for (int j = 0; j < KQA_V32; j++) v[j] = kl_fv_round_away(kl_fv_mul(h[j], vid));
    kl_fv_store_i8x32(q->qs, v, NULL);
}

static inline void kqa_quantize_q8_0(void *y, const float *x, int64_t M, int64_t K, int ith, int nth) {
    int64_t lo, hi;
    km_part(M * (K / KM_QK8_0), ith, nth, &lo, &hi);
    km_block_q8_0 *yb = (km_block_q8_0 *)y;
    for (int64_t b = lo; b < hi; b++) kqa_q8_0_away_at(&yb[b], x + b * KM_QK8_0);
}

#endif /* KM_QUANTIZE_ACT_BODY_H */
