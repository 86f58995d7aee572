/* fused/geglu_quantize_body.h — the family body of geglu_quantize.tanh.q8_k.v1 and geglu_quantize.tanh.q8_0.rne.v1,
 * written once against the lanes interface (common/km_lanes.h); every ISA variant of the two providers is an
 * instantiation of it.
 *
 * Numerics: exactly fused/geglu_quantize_ref.c: the GEGLU of geglu.tanh.f32.v1 (geglu/geglu_body.h's kgg_geglu,
 * lane by lane: the table lookup, one f32 multiply), then quantize_act.q8_k.v1 / quantize_act.q8_0.rne.v1
 * (common/km_actquant.h) of those values, block by block; the f32 product is never stored. Bit-identical with the unfused pair. F: a multiple of 256 (q8_k) or 32 (q8_0).
 * Partition: the M * F / QK blocks as one flat range (km_part; F % QK == 0, so a block never crosses a row): a
 * one-row decode step splits across threads, and every block is one thread's work, so any (ith, nth) gives the
 * same bytes. No schedule parameters.
 */
#ifndef KM_GEGLU_QUANTIZE_BODY_H
#define KM_GEGLU_QUANTIZE_BODY_H

#include "km_actquant.h"
#include "../geglu/geglu_body.h"

#define KGQ_Q8_0 1 /* out: q8_0 blocks [M, F / 32] (rne) */
#define KGQ_Q8_K 2 /* out: q8_k blocks [M, F / 256] */

static inline void kgq_geglu_quantize(void *q, const float *gate, const float *up, int64_t M, int64_t F, int ith,
                                      int nth, const int kind) {
    const int64_t qk = kind == KGQ_Q8_0 ? KM_QK8_0 : KM_QK_K;
    int64_t lo, hi;
    km_part(M * (F / qk), ith, nth, &lo, &hi);
    for (int64_t b = lo; b < hi; b++) {
        const float *g = gate + b * qk, *u = up + b * qk; /* [qk] */
        if (kind == KGQ_Q8_0) {
            kl_fv h[KQA_V32]; /* the block's 32 products */
            for (int j = 0; j < KQA_V32; j++)
                h[j] = kgg_geglu(kl_fv_loadu(g + j * KL_FV_LANES), kl_fv_loadu(u + j * KL_FV_LANES));
            kqa_q8_0_rne((km_block_q8_0 *)q + b, h);
        } else {
            float h[KM_QK_K] __attribute__((aligned(64))); /* [256] the block's products */
            for (int j = 0; j < KM_QK_K; j += KL_FV_LANES)
                kl_fv_storeu(h + j, kgg_geglu(kl_fv_loadu(g + j), kl_fv_loadu(u + j)));
            kqa_q8_k((km_block_q8_k *)q + b, h);
        }
    }
}

#endif /* KM_GEGLU_QUANTIZE_BODY_H */
