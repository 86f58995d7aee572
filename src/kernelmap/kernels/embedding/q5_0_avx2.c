/* embedding/q5_0_avx2.c — km_embedding_q5_0__avx2: embedding.q5_0.f32.v1 with AVX2 + F16C.
 *
 * Op: y[m][:] = dequant(table[ids[m]]) * scale; table [V,D] q5_0 ggml_blocks (D/32 blocks per row, D
 * % 32 == 0); ids i32 [M] (the caller guarantees 0 <= id < V); y [M,D] f32 row-major. Numerics: y =
 * (fp16(d) * (f32)q) * scale with q = (nibble | qh bit << 4) - 16; no FMA. Bit-exact with
 * km_embedding_q5_0__ref: the same f32 operations in the same order, lane by lane. Partition: rows m
 * (km_part over M).
 */
#include "km_common.h"
#include "km_simd.h"

void km_embedding_q5_0__avx2(float *y, const void *table, const int32_t *ids, int64_t M, int64_t V, int64_t D,
                             float scale, int ith, int nth) {
    (void)V;
    int64_t lo, hi;
    km_part(M, ith, nth, &lo, &hi);
    const int64_t nb = D / KM_QK5_0;
    for (int64_t m = lo; m < hi; m++) {
        const uint8_t *row = (const uint8_t *)table + (int64_t)ids[m] * nb * (int64_t)sizeof(km_block_q5_0);
        for (int64_t b = 0; b < nb; b++) {
            const uint8_t *blk = row + b * (int64_t)sizeof(km_block_q5_0);
            km_half h;
            memcpy(&h, blk, 2);
            const float d = km_fp16_to_fp32(h);
            km_avx2_deq32(y + m * D + b * KM_QK5_0, km_avx2_w_q5_0(blk), d, d, 0.0f, scale);
        }
    }
}
