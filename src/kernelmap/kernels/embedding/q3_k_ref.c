/* embedding/q3_k_ref.c — km_embedding_q3_k__ref: the scalar oracle of embedding.q3_k.f32.v1.
 *
 * Op: y[m][:] = dequant(table[ids[m]]) * scale; table [V,D] q3_k ggml_blocks (D/256 blocks per row,
 * D % 256 == 0); ids i32 [M] (the caller guarantees 0 <= id < V); y [M,D] f32 row-major. Numerics
 * (llama.cpp's dequantize_row_q3_K, compiled without FMA, then the f32 scale): for the 16 values of
 * sub-block j with signed 6-bit scale sc_j (stored - 32) and signed 3-bit code q (-4..3),
 * y = ((fp16(d) * sc_j) * q) * scale, every product rounded to f32. Every variant is bit-exact with
 * this ref. Partition: rows m (km_part over M).
 */
#include "km_common.h"
#include "km_kquant.h"

void km_embedding_q3_k__ref(float *y, const void *table, const int32_t *ids, int64_t M, int64_t V, int64_t D,
                            float scale, int ith, int nth) {
    (void)V;
    int64_t lo, hi;
    km_part(M, ith, nth, &lo, &hi);
    const int64_t nb = D / KM_QK_K;
    for (int64_t m = lo; m < hi; m++) {
        const km_block_q3_k *row = (const km_block_q3_k *)table + (int64_t)ids[m] * nb;
        for (int64_t b = 0; b < nb; b++) {
            const km_block_q3_k *blk = &row[b];
            const float d = km_fp16_to_fp32(blk->d);
            float *out = y + m * D + b * KM_QK_K;
            for (int e = 0; e < KM_QK_K; e++) {
                const int j = e / 16, h = e / 128, k = (e % 128) / 32, i = e % 32;
                const int low = j < 8 ? (blk->scales[j] & 0x0F) : (blk->scales[j - 8] >> 4);
                const int sc = (low | (((blk->scales[8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) - 32;
                const int q = ((blk->qs[32 * h + i] >> (2 * k)) & 3) - (((blk->hmask[i] >> (4 * h + k)) & 1) ? 0 : 4);
                out[e] = ((d * (float)sc) * (float)q) * scale;
            }
        }
    }
}
