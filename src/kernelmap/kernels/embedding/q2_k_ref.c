/* embedding/q2_k_ref.c — km_embedding_q2_k__ref: the scalar oracle of embedding.q2_k.f32.v1.
 *
 * Op: y[m][:] = dequant(table[ids[m]]) * scale; table [V,D] q2_k ggml_blocks (D/256 blocks per row,
 * D % 256 == 0); ids i32 [M] (the caller guarantees 0 <= id < V); y [M,D] f32 row-major. Numerics
 * (llama.cpp's dequantize_row_q2_K, which its build compiles without FMA, then the f32 scale): for the
 * 16 values of sub-block j with 4-bit scale sc_j and min m_j (low / high nibble of scales[j]) and 2-bit
 * code q, y = ((fp16(d) * sc_j) * q - fp16(dmin) * m_j) * scale, every product and the difference
 * rounded to f32. Every variant is bit-exact with this ref. Partition: rows m (km_part over M).
 */
#include "km_common.h"
#include "km_kquant.h"

void km_embedding_q2_k__ref(float *y, const void *table, const int32_t *ids, int64_t M, int64_t V, int64_t D,
                            float scale, int ith, int nth) {
    (void)V;
    int64_t lo, hi;
    km_part(M, ith, nth, &lo, &hi);
    const int64_t nb = D / KM_QK_K;
    for (int64_t m = lo; m < hi; m++) {
        const km_block_q2_k *row = (const km_block_q2_k *)table + (int64_t)ids[m] * nb;
        for (int64_t b = 0; b < nb; b++) {
            const km_block_q2_k *blk = &row[b];
            const float d = km_fp16_to_fp32(blk->d), dmin = km_fp16_to_fp32(blk->dmin);
            float *out = y + m * D + b * KM_QK_K;
            for (int e = 0; e < KM_QK_K; e++) {
                const int j = e / 16, h = e / 128, k = (e % 128) / 32, i = e % 32;
                const int q = (blk->qs[32 * h + i] >> (2 * k)) & 3;
                const float dl = d * (float)(blk->scales[j] & 0x0F), ml = dmin * (float)(blk->scales[j] >> 4);
                out[e] = (dl * (float)q - ml) * scale;
            }
        }
    }
}
