/* embedding/q_k_embedding_body.h — the family body of embedding.<t>.f32.v1 for the K-quant tables
 * (t = q2_k, q3_k, q4_k, q5_k, q6_k), written once against the lanes interface (common/km_lanes.h);
 * every ISA variant of the five providers is an instantiation of it.
 *
 * Op (interface embedding.lookup.v1): y[m][:] = dequant(table[ids[m]]) * scale; table [V, D] ggml_blocks
 * (D / 256 blocks per row, D % 256 == 0); ids i32 [M] (the caller guarantees 0 <= id < V); y [M, D] f32.
 * Numerics (exactly embedding/<t>_ref.c: llama.cpp's dequantize_row_<t>, built without FMA, then its
 * f32 scale): per 16-value piece p of a block with code q(e), scale sc[p] and min mn[p],
 *     q2_K: dl = d * sc, ml = dmin * mn, v = dl * q - ml      q3_K: dl = d * sc (signed), v = dl * q
 *     q4_K, q5_K: as q2_K with the 32-value scales / mins     q6_K: dl = d * sc, v = dl * (u - 32)
 *     y = v * scale
 * every product and difference one f32 rounding, no FMA. Nothing crosses elements, so the lane width
 * cannot change a bit.
 * Partition: rows m (km_part over M).
 * The instantiating file defines the entry point as a call of kqe_embedding; no schedule parameters.
 */
#ifndef KM_Q_K_EMBEDDING_BODY_H
#define KM_Q_K_EMBEDDING_BODY_H

#include "km_kquant.h"
#include "km_lanes.h"

/* Byte offsets of the f16 d and dmin (-1: none) of a block. */
#define KQE_DOFF(fmt) ((fmt) == KL_KQ_Q2_K ? 80 : (fmt) == KL_KQ_Q3_K ? 108 : (fmt) == KL_KQ_Q6_K ? 208 : 0)
#define KQE_MOFF(fmt) ((fmt) == KL_KQ_Q2_K ? 82 : (fmt) == KL_KQ_Q3_K || (fmt) == KL_KQ_Q6_K ? -1 : 2)

/* The block's per-16-value scales and mins as integers (the 32-value formats repeat each). */
KL_INLINE void kqe_scales(const uint8_t *blk, const int fmt, int32_t sc[16], int32_t mn[16]) {
    if (fmt == KL_KQ_Q2_K) {
        for (int p = 0; p < 16; p++) {
            sc[p] = blk[p] & 0x0F;
            mn[p] = blk[p] >> 4;
        }
    } else if (fmt == KL_KQ_Q3_K) {
        uint64_t w[2];
        km_q3k_scales64(blk + 96, &w[0], &w[1]);
        for (int p = 0; p < 16; p++) {
            sc[p] = (int32_t)((w[p >> 3] >> (8 * (p & 7))) & 0xFF) - 32;
            mn[p] = 0;
        }
    } else if (fmt == KL_KQ_Q6_K) {
        for (int p = 0; p < 16; p++) {
            sc[p] = (int8_t)blk[192 + p];
            mn[p] = 0;
        }
    } else {
        uint64_t s, m;
        km_q4k_scales64(blk + 4, &s, &m);
        for (int p = 0; p < 16; p++) {
            sc[p] = (int32_t)((s >> (8 * (p >> 1))) & 0xFF);
            mn[p] = (int32_t)((m >> (8 * (p >> 1))) & 0xFF);
        }
    }
}

/* One block's 256 values into out. */
KL_INLINE void kqe_block(float *out, const uint8_t *blk, float scale, const int fmt) {
    int8_t q[KM_QK_K];
    const kl_kqs s = kl_kqs_load(blk, fmt);
    for (int h = 0; h < 2; h++) {
        kl_kqw w;
        kl_kqw_load(&w, blk, s, fmt, h);
        kl_kqw_codes(q + 128 * h, &w, fmt);
    }
    int32_t sc[16], mn[16];
    kqe_scales(blk, fmt, sc, mn);
    uint16_t hd, hm = 0;
    memcpy(&hd, blk + KQE_DOFF(fmt), 2);
    if (KQE_MOFF(fmt) >= 0) memcpy(&hm, blk + KQE_MOFF(fmt), 2);
    const float d = kl_h2f(hd), dmin = kl_h2f(hm);
    const kl_f8 vs = kl_f8_set1(scale);
    for (int p = 0; p < 16; p++) {
        const kl_f8 dl = kl_f8_set1(kl_f32_mul(d, (float)sc[p]));
        const kl_f8 ml = kl_f8_set1(kl_f32_mul(dmin, (float)mn[p]));
        for (int i = 0; i < 16; i += 8) {
            kl_f8 v = kl_f8_mul(dl, kl_f8_cvt_i8(q + 16 * p + i, fmt == KL_KQ_Q6_K ? 32 : 0));
            if (KQE_MOFF(fmt) >= 0) v = kl_f8_sub(v, ml);
            kl_f8_storeu(out + 16 * p + i, kl_f8_mul(v, vs));
        }
    }
}

static inline void kqe_embedding(float *y, const void *table, const int32_t *ids, int64_t M, int64_t D, float scale,
                                 int ith, int nth, const int fmt) {
    int64_t lo, hi;
    km_part(M, ith, nth, &lo, &hi);
    const int64_t nb = D / KM_QK_K;
    const int64_t wblk = KL_KQ_WBLK(fmt);
    for (int64_t m = lo; m < hi; m++) {
        const uint8_t *row = (const uint8_t *)table + (int64_t)ids[m] * nb * wblk;
        for (int64_t b = 0; b < nb; b++) kqe_block(y + m * D + b * KM_QK_K, row + b * wblk, scale, fmt);
    }
}

#endif /* KM_Q_K_EMBEDDING_BODY_H */
