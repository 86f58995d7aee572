/* km_actquant.h — the activation quantizers of quantize_act.q8_0.rne.v1 and quantize_act.q8_k.v1, written
 * once against the lanes interface (km_lanes.h), and shared by the family bodies that state them:
 * quantize/quantize_act_body.h and the fused residual_add_rmsnorm_quantize bodies.
 *
 * q8_0, rne (quantize/q8_0_rne_ref.c, llama.cpp's x86 activation rule): per block of 32, amax = max |x|
 * (exact in any order); d = amax / 127.0f; id = amax != 0 ? 127.0f / amax : 0 (not 1/d); the block's d is
 * fp16(d) (nearest even); q = x * id rounded to the nearest integer, ties to even: |x * id| <= 127(1 + 2^-23)^2
 * < 127.5, so q lies in [-127, 127] and nothing saturates.
 * q8_k (quantize/q8_k_ref.c, llama.cpp's quantize_row_q8_K): per block of 256, amax = max |x|, max = the
 * signed x at the first index reaching amax; amax == 0 gives d = 0 and zero quants and sums; else
 * iscale = -127.0f / max, q = min(127, nearest-even(iscale * x)) (the same bound as above: the min never
 * binds, the lanes' saturation equals it), bsums[g] = the sum of quants 16g .. 16g + 15, d = 1.0f / iscale.
 */
#ifndef KM_ACTQUANT_H
#define KM_ACTQUANT_H

#include "km_lanes.h"

#define KQA_V32 (KM_QK8_0 / KL_FV_LANES) /* vectors per q8_0 block */

/* One q8_0 block from its 32 values, held as KQA_V32 vectors. */
KL_INLINE void kqa_q8_0_rne(km_block_q8_0 *q, const kl_fv *h) {
    kl_fv m = kl_fv_abs(h[0]);
    for (int j = 1; j < KQA_V32; j++) m = kl_fv_max(m, kl_fv_abs(h[j]));
    const float amax = kl_fv_hmax(m);
    const float d = amax / 127.0f;
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    q->d = km_fp32_to_fp16(d);
    const kl_fv vid = kl_fv_set1(id);
    kl_fv v[KQA_V32];
    for (int j = 0; j < KQA_V32; j++) v[j] = kl_fv_mul(h[j], vid);
    kl_fv_store_i8x32(q->qs, v, NULL);
}

/* One q8_0 block from the 32 floats at x. */
KL_INLINE void kqa_q8_0_rne_at(km_block_q8_0 *q, const float *x) {
    kl_fv h[KQA_V32];
    for (int j = 0; j < KQA_V32; j++) h[j] = kl_fv_loadu(x + j * KL_FV_LANES);
    kqa_q8_0_rne(q, h);
}

/* One q8_k block from the 256 floats at x. */
KL_INLINE void kqa_q8_k(km_block_q8_k *q, const float *x) {
    kl_fv m = kl_fv_zero();
    for (int j = 0; j < KM_QK_K; j += KL_FV_LANES) m = kl_fv_max(m, kl_fv_abs(kl_fv_loadu(x + j)));
    const float amax = kl_fv_hmax(m);
    if (amax == 0.0f) {
        q->d = 0.0f;
        memset(q->qs, 0, sizeof q->qs);
        memset(q->bsums, 0, sizeof q->bsums);
        return;
    }
    const kl_fv vamax = kl_fv_set1(amax);
    int first = 0;
    for (int j = 0; j < KM_QK_K; j += KL_FV_LANES) {
        const unsigned eq = kl_fvm_bits(kl_fv_cmp_eq(kl_fv_abs(kl_fv_loadu(x + j)), vamax));
        if (eq) {
            first = j + __builtin_ctz(eq);
            break;
        }
    }
    const float iscale = -127.0f / x[first];
    const kl_fv vs = kl_fv_set1(iscale);
    for (int g = 0; g < KM_QK_K; g += 32) {
        kl_fv v[KQA_V32];
        int32_t s[2];
        for (int j = 0; j < KQA_V32; j++) v[j] = kl_fv_mul(kl_fv_loadu(x + g + j * KL_FV_LANES), vs);
        kl_fv_store_i8x32(q->qs + g, v, s);
        q->bsums[g / 16] = (int16_t)s[0];
        q->bsums[g / 16 + 1] = (int16_t)s[1];
    }
    q->d = 1.0f / iscale;
}

#endif /* KM_ACTQUANT_H */
