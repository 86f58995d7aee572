/* linear/q2_k_vecdot_ref.h — km_q2_k_vec_dot_ref: one output of llama.cpp's vec_dot_q2_K_q8_K order, scalar.
 *
 * Shared by the refs of two contracts: linear.q2_k.q8_k.ggml.v1 (q2_k_q8_k_ggml_ref.c: the AVX-512 build, which
 * takes this order only for tensors of N % 8 != 0 rows, the ones it does not repack) and
 * linear.q2_k.q8_k.ggml_vecdot.v1 (q2_k_q8_k_ggml_vecdot_ref.c: the AVX2 build, which never repacks q2_K).
 *
 * Numerics: 8 f32 lanes acc[l] = +0; per superblock, with q[e] the 2-bit code of value e and sc[j] / mn[j] the
 * low / high nibble of scales[j],
 *   P[l]    = mn[2l] * bsums[2l] + mn[2l+1] * bsums[2l+1]                         (exact int32)
 *   lane[l] = sum_{c<8} sum_{i<4} sc[e/16] * q[e] * q8[e], e = 32c + 4l + i        (exact int32)
 *   dmin = -(x.d * fp16(w.dmin)), d = x.d * fp16(w.d)                               (f32, rounded)
 *   acc[l] = fmaf(dmin, (float)P[l], acc[l]); then acc[l] = fmaf(d, (float)lane[l], acc[l])
 * and the result is km_kq_reduce8(acc).
 * km_q2_k_repack_sums_ref: one superblock's isum / imin of the repacked order (linear.q2_k.q8_k.ggml.v1, N % 8 == 0).
 */
#ifndef KM_LINEAR_Q2_K_VECDOT_REF_H
#define KM_LINEAR_Q2_K_VECDOT_REF_H

#include <math.h>

#include "km_common.h"
#include "km_kquant.h"

/* The 2-bit code of value e (0..255) of a q2_k block: bits 2k..2k+1 of qs[32h + i] for e = 128h + 32k + i. */
static inline int km_q2_code_ref(const km_block_q2_k *b, int e) {
    return (b->qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
}

/* One weight row wr against one activation row xr, nb superblocks each. */
static inline float km_q2_k_vec_dot_ref(const km_block_q2_k *wr, const km_block_q8_k *xr, int64_t nb) {
    float acc[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
    for (int64_t b = 0; b < nb; ++b) {
        const km_block_q2_k *wb = &wr[b];
        const km_block_q8_k *xb = &xr[b];
        const float d = xb->d * km_fp16_to_fp32(wb->d);
        const float dmin = -(xb->d * km_fp16_to_fp32(wb->dmin));
        for (int l = 0; l < 8; ++l) {
            const int32_t p = (int32_t)(wb->scales[2 * l] >> 4) * xb->bsums[2 * l] +
                              (int32_t)(wb->scales[2 * l + 1] >> 4) * xb->bsums[2 * l + 1];
            int32_t lane = 0;
            for (int c = 0; c < 8; ++c) {
                for (int i = 0; i < 4; ++i) {
                    const int e = 32 * c + 4 * l + i;
                    lane += (int32_t)(wb->scales[e / 16] & 0x0F) * km_q2_code_ref(wb, e) * (int32_t)xb->qs[e];
                }
            }
            acc[l] = fmaf(dmin, (float)p, acc[l]);
            acc[l] = fmaf(d, (float)lane, acc[l]);
        }
    }
    return km_kq_reduce8(acc);
}

/* The exact integer sums of one q2_K superblock in the repacked order (the refs of linear.q2_k.q8_k.ggml.v1,
 * N % 8 == 0, on the GGUF layout and on q2_k_c16): *isum = sum_j (scales[j] & 15) * (sub-block j's 16 code * quant
 * products), *imin = sum_j (scales[j] >> 4) * bsums[j]. */
static inline void km_q2_k_repack_sums_ref(const km_block_q2_k *w, const km_block_q8_k *x, int32_t *isum,
                                           int32_t *imin) {
    int32_t is = 0, im = 0;
    for (int j = 0; j < 16; ++j) {
        int32_t dot = 0;
        for (int i = 0; i < 16; ++i) dot += km_q2_code_ref(w, 16 * j + i) * x->qs[16 * j + i];
        is += (int32_t)(w->scales[j] & 0x0F) * dot;
        im += (int32_t)(w->scales[j] >> 4) * x->bsums[j];
    }
    *isum = is;
    *imin = im;
}

#endif /* KM_LINEAR_Q2_K_VECDOT_REF_H */
