/* embedding/q5_0_ref.c — km_embedding_q5_0__ref: the scalar oracle of embedding.q5_0.f32.v1.
 *
 * Op: y[m][:] = dequant(table[ids[m]]) * scale; table [V,D] q5_0 ggml_blocks (D/32 blocks per row, D
 * % 32 == 0); ids i32 [M] (the caller guarantees 0 <= id < V); y [M,D] f32 row-major. Numerics: y =
 * (fp16(d) * (f32)q) * scale with q = (nibble | qh bit << 4) - 16; no FMA. The dequantized value
 * (before the scale) is bit-identical to gguf.quants.dequantize; every variant is bit-exact with
 * this ref. Partition: rows m (km_part over M).
 */
#include "km_common.h"

void km_embedding_q5_0__ref(float *y, const void *table, const int32_t *ids, int64_t M, int64_t V, int64_t D,
                            float scale, int ith, int nth) {
    (void)V;
    int64_t lo, hi;
    km_part(M, ith, nth, &lo, &hi);
    const int64_t nb = D / KM_QK5_0;
    for (int64_t m = lo; m < hi; m++) {
        const km_block_q5_0 *row = (const km_block_q5_0 *)table + (int64_t)ids[m] * nb;
        float *out = y + m * D;
        for (int64_t b = 0; b < nb; b++) {
            const float d = km_fp16_to_fp32(row[b].d);
            uint32_t qh;
            memcpy(&qh, row[b].qh, 4);
            for (int i = 0; i < 16; i++) {
                const int lo4 = (row[b].qs[i] & 0x0F) | (int)(((qh >> i) & 1u) << 4);
                const int hi4 = (row[b].qs[i] >> 4) | (int)(((qh >> (i + 16)) & 1u) << 4);
                out[b * 32 + i] = (d * (float)(lo4 - 16)) * scale;
                out[b * 32 + i + 16] = (d * (float)(hi4 - 16)) * scale;
            }
        }
    }
}
