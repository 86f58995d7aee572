/* km_q8_k_ref.h — one q8_K block by the rule of contract quantize_act.q8_k.v1 (llama.cpp's quantize_row_q8_K, the
 * CPU from_float of GGML_TYPE_Q8_K), in plain C, shared by the scalar oracles that state it: quantize/q8_k_ref.c,
 * fused/residual_add_rmsnorm_quantize_q8_k_ref.c and fused/geglu_quantize_ref.c.
 *
 * km_q8_k_block_ref(x, y), 256 values: amax = max |x_j|, max = the signed x at the first index reaching amax;
 * amax == 0 gives d = 0 and zero quants and bsums; else iscale = -127.0f / max, q_j = min(127,
 * nearbyintf(iscale * x_j)) (default rounding mode: ties to even), bsums[g] = the sum of q over 16g .. 16g + 15,
 * d = 1.0f / iscale (f32). Inputs must be finite.
 */
#ifndef KM_Q8_K_REF_H
#define KM_Q8_K_REF_H

#include <math.h>

#include "km_common.h"

static inline void km_q8_k_block_ref(const float *x, km_block_q8_k *y) {
    float amax = 0.0f;
    float max = 0.0f;
    for (int j = 0; j < KM_QK_K; ++j) {
        const float ax = fabsf(x[j]);
        if (ax > amax) {
            amax = ax;
            max = x[j];
        }
    }
    if (amax == 0.0f) {
        y->d = 0.0f;
        memset(y->qs, 0, sizeof y->qs);
        memset(y->bsums, 0, sizeof y->bsums);
        return;
    }
    const float iscale = -127.0f / max;
    for (int j = 0; j < KM_QK_K; ++j) {
        const int q = (int)nearbyintf(iscale * x[j]);
        y->qs[j] = (int8_t)(q < 127 ? q : 127);
    }
    for (int i = 0; i < KM_QK_K / 16; ++i) {
        int32_t s = 0;
        for (int l = 0; l < 16; ++l) s += y->qs[16 * i + l];
        y->bsums[i] = (int16_t)s;
    }
    y->d = 1.0f / iscale;
}

#endif /* KM_Q8_K_REF_H */
