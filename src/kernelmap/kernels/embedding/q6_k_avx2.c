/* embedding/q6_k_avx2.c — km_embedding_q6_k__avx2: embedding.q6_k.f32.v1 with AVX2 + F16C.
 *
 * Op: y[m][:] = dequant(table[ids[m]]) * scale; table [V,D] q6_k ggml_blocks (D/256 blocks per row,
 * D % 256 == 0); ids i32 [M] (the caller guarantees 0 <= id < V); y [M,D] f32 row-major. Numerics: y
 * = ((fp16(d) * scales[i / 16]) * q) * scale with q = (ql nibble | qh 2 bits << 4) - 32; no FMA.
 * Bit-exact with km_embedding_q6_k__ref: the same f32 operations in the same order, lane by lane.
 * Partition: rows m (km_part over M).
 */
#include "km_common.h"
#include "km_simd.h"

void km_embedding_q6_k__avx2(float *y, const void *table, const int32_t *ids, int64_t M, int64_t V, int64_t D,
                             float scale, int ith, int nth) {
    (void)V;
    int64_t lo, hi;
    km_part(M, ith, nth, &lo, &hi);
    const int64_t nb = D / KM_QK_K;
    const __m256i low4 = _mm256_set1_epi8(0x0F), two = _mm256_set1_epi8(3), off = _mm256_set1_epi8(32);
    for (int64_t m = lo; m < hi; m++) {
        const km_block_q6_k *row = (const km_block_q6_k *)table + (int64_t)ids[m] * nb;
        for (int64_t b = 0; b < nb; b++) {
            const km_block_q6_k *blk = &row[b];
            const float d = km_fp16_to_fp32(blk->d);
            float *out = y + m * D + b * KM_QK_K;
            for (int h = 0; h < 2; h++) {
                const __m256i ql0 = _mm256_loadu_si256((const __m256i *)(blk->ql + 64 * h));
                const __m256i ql1 = _mm256_loadu_si256((const __m256i *)(blk->ql + 64 * h + 32));
                const __m256i qh = _mm256_loadu_si256((const __m256i *)(blk->qh + 32 * h));
                for (int k = 0; k < 4; k++) {
                    __m256i src = k & 1 ? ql1 : ql0;
                    __m256i low = _mm256_and_si256(k & 2 ? _mm256_srli_epi16(src, 4) : src, low4);
                    __m256i high = _mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * k)), two);
                    __m256i q = _mm256_sub_epi8(_mm256_or_si256(low, _mm256_slli_epi16(high, 4)), off);
                    const int s = 8 * h + 2 * k;
                    km_avx2_deq32(out + 128 * h + 32 * k, q, d * (float)blk->scales[s], d * (float)blk->scales[s + 1],
                                   0.0f, scale);
                }
            }
        }
    }
}
