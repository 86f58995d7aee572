/* linear/q6_k_vecdot_ref.h — km_q6_k_lanes_ref: one superblock's eight exact int32 lanes of llama.cpp's
 * vec_dot_q6_K_q8_K order, scalar.
 *
 * Shared by the refs of contract linear.q6_k.q8_k.ggml.v1 on the GGUF layout (q6_k_q8_k_ggml_ref.c) and on the
 * repacked layout q6_k_c16 (q6_k_q8_k_ggml_c16_ref.c, which rebuilds each GGUF block first).
 * u[e] in 0..63 is the unsigned 6-bit code of value e (weight value u - 32), sc[j] the int8 scale of values
 * 16j..16j+15, bs[j] the activation's bsums:
 *     lane[l] = sum_{c<8} sum_{i<4} sc[e/16] * u[e] * q8[e]  -  32 * (sc[2l] * bs[2l] + sc[2l+1] * bs[2l+1])
 *   (e = 32c + 4l + i; exact int32). The offset of lane l covers sub-blocks 2l and 2l+1, not the values of lane l:
 *   that is how llama.cpp's multiply-add of the 16 scales with the 16 bsums lands in its 8 lanes.
 */
#ifndef KM_LINEAR_Q6_K_VECDOT_REF_H
#define KM_LINEAR_Q6_K_VECDOT_REF_H

#include "km_common.h"
#include "km_kquant.h"

/* The 256 unsigned 6-bit codes of a q6_k block, in value order. Each 128-value half h has 64 ql bytes and 32 qh
 * bytes; value 128h + 32q + l (q = 0..3, l = 0..31) takes its low 4 bits from ql[l + 32*(q & 1)] (low nibble for
 * q < 2, high nibble otherwise) and its top 2 bits from bits 2q..2q+1 of qh[l]. */
static inline void km_q6_codes_ref(const km_block_q6_k *b, int32_t u[KM_QK_K]) {
    for (int h = 0; h < 2; ++h) {
        const uint8_t *ql = b->ql + 64 * h;
        const uint8_t *qh = b->qh + 32 * h;
        int32_t *o = u + 128 * h;
        for (int l = 0; l < 32; ++l) {
            o[l] = (ql[l] & 0x0F) | ((qh[l] & 3) << 4);
            o[l + 32] = (ql[l + 32] & 0x0F) | (((qh[l] >> 2) & 3) << 4);
            o[l + 64] = (ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4);
            o[l + 96] = (ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4);
        }
    }
}

/* The eight lanes of superblock wb against the activation block xb. */
static inline void km_q6_k_lanes_ref(const km_block_q6_k *wb, const km_block_q8_k *xb, int32_t lane[8]) {
    int32_t u[KM_QK_K];
    km_q6_codes_ref(wb, u);
    for (int l = 0; l < 8; ++l) {
        lane[l] = 0;
        for (int c = 0; c < 8; ++c)
            for (int i = 0; i < 4; ++i) {
                const int e = 32 * c + 4 * l + i;
                lane[l] += (int32_t)wb->scales[e / 16] * u[e] * (int32_t)xb->qs[e];
            }
        lane[l] -= 32 * ((int32_t)wb->scales[2 * l] * (int32_t)xb->bsums[2 * l] +
                         (int32_t)wb->scales[2 * l + 1] * (int32_t)xb->bsums[2 * l + 1]);
    }
}

#endif /* KM_LINEAR_Q6_K_VECDOT_REF_H */
