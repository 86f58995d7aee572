/* quantize/q8_act_body.h — the family body of the activation quantizers llama.cpp's x86 build pairs with the
 * 32-element weights: quantize_act.q8_0.rne.v1 (quantize_row_q8_0) and quantize_act.q8_1.rne.v1
 * (quantize_row_q8_1), written once against the lanes interface (common/km_lanes.h).
 *
 * Op (interface quantize_act.row_major.v1): x [M,K] f32 row-major -> y [M,K] quantized rows, K % 32 == 0:
 * q8_0 blocks (34 bytes: f16 d, int8 qs[32]) or q8_1 blocks (36 bytes: f16 d, f16 s, int8 qs[32]).
 * Numerics (exactly quantize/q8_0_rne_ref.c and q8_1_rne_ref.c): per block of 32, amax = max |x_i| (exact
 * in any order); d = amax / 127.0f; id = (amax != 0) ? 127.0f / amax : 0.0f; qs[i] = x_i * id rounded to
 * the nearest integer, halves to even (in [-127, 127]); y.d = fp16(d) (round to nearest even); q8_1 also
 * y.s = fp16(d * (float) sum(qs)) (the sum is exact; one f32 multiply). Inputs must be finite.
 * Partition: the M*K/32 blocks as one flat range (km_part); blocks are independent, so results are the same
 * for every (ith, nth). No schedule parameters; the instantiating file calls kqa_quantize.
 */
#ifndef KM_Q8_ACT_BODY_H
#define KM_Q8_ACT_BODY_H

#include "km_lanes.h"

#define KQA_Q8_0 0
#define KQA_Q8_1 1

static inline void kqa_quantize(void *y, const float *x, int64_t M, int64_t K, int ith, int nth, const int fmt) {
    int64_t lo, hi;
    km_part(M * (K / 32), ith, nth, &lo, &hi);
    const int64_t blk = fmt == KQA_Q8_1 ? 36 : 34, off = fmt == KQA_Q8_1 ? 4 : 2;
    uint8_t *yb = (uint8_t *)y;
    for (int64_t b = lo; b < hi; b++) {
        const float *xs = x + b * 32;
        uint8_t *out = yb + b * blk;
        kl_f8 v[4];
        for (int j = 0; j < 4; j++) v[j] = kl_f8_loadu(xs + 8 * j);
        const float amax = kl_f8_hmax(kl_f8_max(kl_f8_max(kl_f8_abs(v[0]), kl_f8_abs(v[1])),
                                                kl_f8_max(kl_f8_abs(v[2]), kl_f8_abs(v[3]))));
        const float d = amax / 127.0f;
        const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
        const kl_f8 mul = kl_f8_set1(id);
        int32_t sum = 0;
        for (int j = 0; j < 4; j++) sum += kl_f8_store_i8((int8_t *)(out + off + 8 * j), kl_f8_mul(v[j], mul));
        const km_half hd = km_fp32_to_fp16(d);
        memcpy(out, &hd, 2);
        if (fmt == KQA_Q8_1) {
            const km_half hs = km_fp32_to_fp16(d * (float)sum);
            memcpy(out + 2, &hs, 2);
        }
    }
}

#endif /* KM_Q8_ACT_BODY_H */
