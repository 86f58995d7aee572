/* embedding/q6_k_ref.c — km_embedding_q6_k__ref: the scalar oracle of embedding.q6_k.f32.v1.
 *
 * Op: y[m][:] = dequant(table[ids[m]]) * scale; table [V,D] q6_k ggml_blocks (D/256 blocks per row,
 * D % 256 == 0); ids i32 [M] (the caller guarantees 0 <= id < V); y [M,D] f32 row-major. Numerics: y
 * = ((fp16(d) * scales[i / 16]) * q) * scale with q = (ql nibble | qh 2 bits << 4) - 32; no FMA. The
 * dequantized value (before the scale) is bit-identical to gguf.quants.dequantize; every variant is
 * bit-exact with this ref. Partition: rows m (km_part over M).
 */
#include "km_common.h"

void km_embedding_q6_k__ref(float *y, const void *table, const int32_t *ids, int64_t M, int64_t V, int64_t D,
                            float scale, int ith, int nth) {
    (void)V;
    int64_t lo, hi;
    km_part(M, ith, nth, &lo, &hi);
    const int64_t nb = D / KM_QK_K;
    for (int64_t m = lo; m < hi; m++) {
        const km_block_q6_k *row = (const km_block_q6_k *)table + (int64_t)ids[m] * nb;
        float *out = y + m * D;
        for (int64_t b = 0; b < nb; b++) {
            const km_block_q6_k *blk = &row[b];
            const float d = km_fp16_to_fp32(blk->d);
            for (int h = 0; h < 2; h++) {
                const uint8_t *ql = blk->ql + 64 * h;
                const uint8_t *qh = blk->qh + 32 * h;
                for (int k = 0; k < 4; k++) {
                    for (int l = 0; l < 32; l++) {
                        const int e = 128 * h + 32 * k + l;
                        const int low = (k & 1 ? ql[32 + l] : ql[l]) >> (k & 2 ? 4 : 0) & 0x0F;
                        const int q = (low | (((qh[l] >> (2 * k)) & 3) << 4)) - 32;
                        out[b * KM_QK_K + e] = ((d * (float)blk->scales[e / 16]) * (float)q) * scale;
                    }
                }
            }
        }
    }
}
