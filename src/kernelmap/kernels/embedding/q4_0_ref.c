/* embedding/q4_0_ref.c — km_embedding_q4_0__ref: the scalar oracle of embedding.q4_0.f32.v1.
 *
 * Op: y[m][:] = dequant(table[ids[m]]) * scale; table [V,D] q4_0 ggml_blocks (D/32 blocks per row, D
 * % 32 == 0; element i of a block is the low nibble of qs[i] for i < 16, the high nibble of qs[i-16]
 * otherwise); ids i32 [M] (the caller guarantees 0 <= id < V); y [M,D] f32 row-major. Numerics:
 * y = (fp16(d) * (f32)(q - 8)) * scale, no FMA: the product of a small integer and an f16 value is
 * exact in f32, so this is llama.cpp's get_rows (dequantize_row_q4_0) bit for bit, and with scale 1
 * (every graph but Gemma's) the multiply is exact too. Partition: rows m (km_part over M).
 */
#include "km_common.h"

void km_embedding_q4_0__ref(float *y, const void *table, const int32_t *ids, int64_t M, int64_t V, int64_t D,
                            float scale, int ith, int nth) {
    (void)V;
    int64_t lo, hi;
    km_part(M, ith, nth, &lo, &hi);
    const int64_t nb = D / KM_QK4_0;
    for (int64_t m = lo; m < hi; m++) {
        const km_block_q4_0 *row = (const km_block_q4_0 *)table + (int64_t)ids[m] * nb;
        float *out = y + m * D;
        for (int64_t b = 0; b < nb; b++) {
            const float d = km_fp16_to_fp32(row[b].d);
            for (int i = 0; i < 16; i++) {
                out[b * 32 + i] = (d * (float)((row[b].qs[i] & 0x0F) - 8)) * scale;
                out[b * 32 + i + 16] = (d * (float)((row[b].qs[i] >> 4) - 8)) * scale;
            }
        }
    }
}
