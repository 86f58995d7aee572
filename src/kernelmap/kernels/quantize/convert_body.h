/* quantize/convert_body.h — the family body of the activation conversions llama.cpp's x86 build pairs with the
 * float weights: quantize_act.f16.v1 (ggml_cpu_fp32_to_fp16) and quantize_act.bf16.v1 (ggml_cpu_fp32_to_bf16),
 * written once against the lanes interface (common/km_lanes.h).
 *
 * Op (interface quantize_act.row_major.v1): x [M,K] f32 row-major -> y [M,K] f16 or bf16 row-major (2 bytes
 * per value). Numerics (exactly quantize/f16_ref.c and bf16_ref.c), element-wise: f16 = x rounded to the
 * nearest even half (overflow to inf, subnormal halves kept); bf16 = x rounded to nearest even on bit 16,
 * NaN -> (bits >> 16) | 0x40, no flush of subnormals. Nothing crosses elements, so the lane width cannot
 * change a bit. Partition: the M*K values as one flat range in groups of 8 (km_part over the groups; the
 * last group may be short). The instantiating file calls kcv_convert.
 */
#ifndef KM_CONVERT_BODY_H
#define KM_CONVERT_BODY_H

#include "km_lanes.h"

#define KCV_F16 0
#define KCV_BF16 1

KL_INLINE void kcv_store(uint16_t *p, kl_f8 v, const int fmt) {
    if (fmt == KCV_F16) kl_f8_store_f16(p, v);
    else kl_f8_store_bf16(p, v);
}

static inline void kcv_convert(void *y, const float *x, int64_t M, int64_t K, int ith, int nth, const int fmt) {
    const int64_t total = M * K;
    int64_t lo, hi;
    km_part((total + 7) / 8, ith, nth, &lo, &hi);
    uint16_t *out = (uint16_t *)y;
    for (int64_t g = lo; g < hi; g++) {
        const int64_t i = 8 * g;
        if (i + 8 <= total) {
            kcv_store(out + i, kl_f8_loadu(x + i), fmt);
        } else { /* the short last group through a padded copy */
            float tmp[8] = {0, 0, 0, 0, 0, 0, 0, 0};
            uint16_t t16[8];
            memcpy(tmp, x + i, (size_t)(total - i) * sizeof(float));
            kcv_store(t16, kl_f8_loadu(tmp), fmt);
            memcpy(out + i, t16, (size_t)(total - i) * sizeof(uint16_t));
        }
    }
}

#endif /* KM_CONVERT_BODY_H */
