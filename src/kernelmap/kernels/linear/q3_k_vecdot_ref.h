/* linear/q3_k_vecdot_ref.h — km_q3_k_lanes_ref: one superblock's eight exact int32 lanes of llama.cpp's
 * vec_dot_q3_K_q8_K order, scalar.
 *
 * Shared by the refs of contract linear.q3_k.q8_k.ggml.v1 on the GGUF layout (q3_k_q8_k_ggml_ref.c) and on the
 * repacked layout q3_k_c16 (q3_k_q8_k_ggml_c16_ref.c, which rebuilds each GGUF block first).
 * q[e] in -4..3 is the signed code of value e (value 128h + 32k + i: bits 2k..2k+1 of qs[32h + i], minus 4 when
 * bit 4h + k of hmask[i] is clear), sc[j] the signed 6-bit scale of values 16j..16j+15 (stored - 32):
 *     lane[l] = sum_{c<8} sum_{i<4} sc[e/16] * q[e] * q8[e]   (e = 32c + 4l + i; exact int32)
 */
#ifndef KM_LINEAR_Q3_K_VECDOT_REF_H
#define KM_LINEAR_Q3_K_VECDOT_REF_H

#include "km_common.h"
#include "km_kquant.h"

/* The 16 signed scales of a q3_k block (bit layout: km_kquant.h). */
static inline void km_q3_scales_ref(const km_block_q3_k *b, int32_t sc[16]) {
    for (int j = 0; j < 16; ++j) {
        const int low = j < 8 ? (b->scales[j] & 0x0F) : (b->scales[j - 8] >> 4);
        const int top = (b->scales[8 + j % 4] >> (2 * (j / 4))) & 3;
        sc[j] = (low | (top << 4)) - 32;
    }
}

/* The eight lanes of superblock wb against the activation block xb. */
static inline void km_q3_k_lanes_ref(const km_block_q3_k *wb, const km_block_q8_k *xb, int32_t lane[8]) {
    int32_t sc[16], q[KM_QK_K];
    km_q3_scales_ref(wb, sc);
    for (int e = 0; e < KM_QK_K; ++e) {
        const int h = e / 128, k = (e % 128) / 32, i = e % 32;
        const int low = (wb->qs[32 * h + i] >> (2 * k)) & 3;
        q[e] = low - (((wb->hmask[i] >> (4 * h + k)) & 1) ? 0 : 4);
    }
    for (int l = 0; l < 8; ++l) {
        lane[l] = 0;
        for (int c = 0; c < 8; ++c)
            for (int i = 0; i < 4; ++i) {
                const int e = 32 * c + 4 * l + i;
                lane[l] += sc[e / 16] * q[e] * (int32_t)xb->qs[e];
            }
    }
}

#endif /* KM_LINEAR_Q3_K_VECDOT_REF_H */
