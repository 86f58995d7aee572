/* embedding/q4_k_avx2.c — km_embedding_q4_k__avx2: embedding.q4_k.f32.v1 with AVX2 + F16C.
 *
 * Op: y[m][:] = dequant(table[ids[m]]) * scale; table [V,D] q4_k ggml_blocks (D/256 blocks per row,
 * D % 256 == 0); ids i32 [M] (the caller guarantees 0 <= id < V); y [M,D] f32 row-major. Numerics:
 * for sub-block j (32 values) with 6-bit scale sc_j and min m_j, y = ((fp16(d) * sc_j) * q -
 * (fp16(dmin) * m_j)) * scale, every product and the difference rounded to f32; no FMA. Bit-exact
 * with km_embedding_q4_k__ref: the same f32 operations in the same order, lane by lane. Partition:
 * rows m (km_part over M).
 */
#include "km_common.h"
#include "km_simd.h"

/* The 6-bit scale and min of sub-block j (0..7) from the 12 packed bytes. */
static void scale_min(const uint8_t *s, int j, int *sc, int *mn) {
    if (j < 4) {
        *sc = s[j] & 63;
        *mn = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 0x0F) | ((s[j - 4] >> 6) << 4);
        *mn = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}

void km_embedding_q4_k__avx2(float *y, const void *table, const int32_t *ids, int64_t M, int64_t V, int64_t D,
                             float scale, int ith, int nth) {
    (void)V;
    int64_t lo, hi;
    km_part(M, ith, nth, &lo, &hi);
    const int64_t nb = D / KM_QK_K;
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    for (int64_t m = lo; m < hi; m++) {
        const km_block_q4_k *row = (const km_block_q4_k *)table + (int64_t)ids[m] * nb;
        for (int64_t b = 0; b < nb; b++) {
            const km_block_q4_k *blk = &row[b];
            const float d = km_fp16_to_fp32(blk->d);
            const float dmin = km_fp16_to_fp32(blk->dmin);
            float *out = y + m * D + b * KM_QK_K;
            for (int c = 0; c < 4; c++) {
                int sc0, m0, sc1, m1;
                scale_min(blk->scales, 2 * c, &sc0, &m0);
                scale_min(blk->scales, 2 * c + 1, &sc1, &m1);
                const float d0 = d * (float)sc0, dm0 = dmin * (float)m0;
                const float d1 = d * (float)sc1, dm1 = dmin * (float)m1;
                __m256i q = _mm256_loadu_si256((const __m256i *)(blk->qs + 32 * c));
                km_avx2_deq32(out + 64 * c, _mm256_and_si256(q, low4), d0, d0, dm0, scale);
                km_avx2_deq32(out + 64 * c + 32, _mm256_and_si256(_mm256_srli_epi16(q, 4), low4), d1, d1, dm1, scale);
            }
        }
    }
}
