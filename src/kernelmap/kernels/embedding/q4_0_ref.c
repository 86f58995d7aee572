/* embedding/q4_0_ref.c — km_embedding_q4_0__ref: the scalar oracle of embedding.q4_0.f32.v1.
 *
 * Op: y[m][:] = dequant(table[ids[m]]) * scale; table [V,D] q4_0 ggml_blocks (D/32 blocks of 18 bytes per
 * row, D % 32 == 0); ids i32 [M] (the caller guarantees 0 <= id < V); y [M,D] f32 row-major.
 * Numerics: q = nibble - 8; y = ((f32)q * fp16(d)) * scale, each step one f32 rounding (no FMA): llama.cpp's dequantize_row_q4_0 (what its
 * get_rows uses, built without FMA in libggml-base) followed by the model's f32 scale. Every variant is
 * bit-exact with this ref. Partition: rows m (km_part over M).
 */
#include "km_common.h"

static float half_at(const uint8_t *p) {
    km_half h;
    memcpy(&h, p, 2);
    return km_fp16_to_fp32(h);
}

void km_embedding_q4_0__ref(float *y, const void *table, const int32_t *ids, int64_t M, int64_t V, int64_t D,
                            float scale, int ith, int nth) {
    (void)V;
    int64_t lo, hi;
    km_part(M, ith, nth, &lo, &hi);
    const int64_t nb = D / 32;
    for (int64_t m = lo; m < hi; m++) {
        const uint8_t *row = (const uint8_t *)table + (int64_t)ids[m] * nb * 18;
        float *out = y + m * D;
        for (int64_t b = 0; b < nb; b++) {
            const uint8_t *blk = row + b * 18;
            const float d = half_at(blk);
            for (int i = 0; i < 16; i++) {
                out[b * 32 + i] = ((float)((blk[2 + i] & 0x0F) - 8) * d) * scale;
                out[b * 32 + i + 16] = ((float)((blk[2 + i] >> 4) - 8) * d) * scale;
            }
        }
    }
}
