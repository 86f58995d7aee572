/* geglu/geglu_ref.h — one element of contract geglu.tanh.f32.v1 in plain C, shared by the scalar oracles that state
 * it: geglu/tanh_f32_ref.c and fused/geglu_quantize_ref.c.
 *
 * kgg_geglu1_ref(x, g): llama.cpp's ggml_vec_geglu_f32 with GGML_GELU_FP16 for gate x and up g: x <= -10 gives
 * +0.0; x >= 10 gives x * g; a NaN x gives the f32 quiet NaN 0x7FC00000 times g; otherwise x rounded to f16
 * (nearest even) indexes gelu_table.h (its f16 entry, the tanh GELU llama.cpp tabulates, widened to f32) and the
 * result is that times g (one f32 multiply).
 */
#ifndef KM_GEGLU_REF_H
#define KM_GEGLU_REF_H

#include "km_common.h"
#include "gelu_table.h"

static inline float kgg_geglu1_ref(float x, float g) {
    if (x <= -10.0f) return 0.0f;
    if (x >= 10.0f) return x * g;
    if (x != x) {
        const uint32_t bits = 0x7FC00000u; /* the table's NaN entry 0x7E00 widened to f32 */
        float qnan;
        memcpy(&qnan, &bits, sizeof qnan);
        return qnan * g;
    }
    const km_half h = km_fp32_to_fp16(x);
    const uint32_t idx = (uint32_t)(h & 0x7FFFu) + ((h & 0x8000u) ? (uint32_t)KM_GELU_HALF : 0u);
    return km_fp16_to_fp32(km_gelu_f16_table[idx]) * g;
}

#endif /* KM_GEGLU_REF_H */
