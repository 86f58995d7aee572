/* embedding/q32_embedding_body.h — the family body of embedding.<t>.f32.v1 for the 32-element tables (t = q4_0,
 * q4_1, q5_0, q5_1, q8_0), written once against the lanes interface (common/km_lanes.h); every ISA variant
 * of those providers is an instantiation of it.
 *
 * Op (interface embedding.lookup.v1): y[m][:] = dequant(table[ids[m]]) * scale; table [V, D] ggml_blocks
 * (D / 32 blocks per row, D % 32 == 0); ids i32 [M] (the caller guarantees 0 <= id < V); y [M, D] f32.
 * Numerics (exactly embedding/<t>_ref.c: llama.cpp's dequantize_row_<t>, which get_rows uses and which
 * libggml-base builds without FMA, then the model's f32 scale): per element with integer q (q4_0:
 * nibble - 8, q5_0: code - 16, q8_0: the int8, q4_1 / q5_1: the unsigned code), v = (f32) q * fp16(d);
 * q4_1 / q5_1: v = v + fp16(m); y = v * scale; each one f32 rounding. Nothing crosses elements, so the
 * lane width cannot change a bit. Partition: rows m (km_part over M).
 * No schedule parameters; the instantiating file calls kqe32_embedding.
 */
#ifndef KM_Q32_EMBEDDING_BODY_H
#define KM_Q32_EMBEDDING_BODY_H

#include "km_lanes.h"

static inline void kqe32_embedding(float *y, const void *table, const int32_t *ids, int64_t M, int64_t D, float scale,
                                   int ith, int nth, const int fmt) {
    int64_t lo, hi;
    km_part(M, ith, nth, &lo, &hi);
    const int64_t nb = D / 32, wblk = KL_Q32_WBLK(fmt);
    const kl_f8 vs = kl_f8_set1(scale);
    for (int64_t m = lo; m < hi; m++) {
        const uint8_t *row = (const uint8_t *)table + (int64_t)ids[m] * nb * wblk;
        float *out = y + m * D;
        for (int64_t b = 0; b < nb; b++) {
            const uint8_t *blk = row + b * wblk;
            km_half h;
            memcpy(&h, blk, 2);
            const kl_f8 d = kl_f8_set1(km_fp16_to_fp32(h));
            memcpy(&h, blk + 2, 2);
            const kl_f8 mn = kl_f8_set1(KL_Q32_HASMIN(fmt) ? km_fp16_to_fp32(h) : 0.0f);
            for (int j = 0; j < 4; j++) {
                kl_f8 v = kl_f8_mul(kl_q32_values8(blk, fmt, j), d);
                if (KL_Q32_HASMIN(fmt)) v = kl_f8_add(v, mn);
                kl_f8_storeu(out + 32 * b + 8 * j, kl_f8_mul(v, vs));
            }
        }
    }
}

#endif /* KM_Q32_EMBEDDING_BODY_H */
