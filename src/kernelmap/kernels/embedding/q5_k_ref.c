/* embedding/q5_k_ref.c — km_embedding_q5_k__ref: the scalar oracle of embedding.q5_k.f32.v1.
 *
 * Op: y[m][:] = dequant(table[ids[m]]) * scale; table [V,D] q5_k ggml_blocks (D/256 blocks per row,
 * D % 256 == 0); ids i32 [M] (the caller guarantees 0 <= id < V); y [M,D] f32 row-major. Numerics
 * (llama.cpp's dequantize_row_q5_K, compiled without FMA, then the f32 scale): for the 32 values of
 * sub-block j with 6-bit scale sc_j and min m_j and 5-bit code q (nibble + 16 * qh bit),
 * y = ((fp16(d) * sc_j) * q - fp16(dmin) * m_j) * scale, every product and the difference rounded to
 * f32. Every variant is bit-exact with this ref. Partition: rows m (km_part over M).
 */
#include "km_common.h"
#include "km_kquant.h"

void km_embedding_q5_k__ref(float *y, const void *table, const int32_t *ids, int64_t M, int64_t V, int64_t D,
                            float scale, int ith, int nth) {
    (void)V;
    int64_t lo, hi;
    km_part(M, ith, nth, &lo, &hi);
    const int64_t nb = D / KM_QK_K;
    for (int64_t m = lo; m < hi; m++) {
        const km_block_q5_k *row = (const km_block_q5_k *)table + (int64_t)ids[m] * nb;
        for (int64_t b = 0; b < nb; b++) {
            const km_block_q5_k *blk = &row[b];
            const float d = km_fp16_to_fp32(blk->d), dmin = km_fp16_to_fp32(blk->dmin);
            uint8_t sc[8], mn[8];
            km_q4k_scales(blk->scales, sc, mn);
            float *out = y + m * D + b * KM_QK_K;
            for (int e = 0; e < KM_QK_K; e++) {
                const int j = e / 32, g = e / 64, i = e % 32;
                const int low = (j & 1) ? blk->qs[32 * g + i] >> 4 : blk->qs[32 * g + i] & 0x0F;
                const int q = low + (((blk->qh[i] >> j) & 1) ? 16 : 0);
                const float dl = d * (float)sc[j], ml = dmin * (float)mn[j];
                out[e] = (dl * (float)q - ml) * scale;
            }
        }
    }
}
