/* embedding/f32_avx512.c — km_embedding_f32__avx512: embedding.f32.f32.v1 with AVX-512 F/BW/VL/DQ.
 *
 * Op: y[m][:] = dequant(table[ids[m]]) * scale; table [V,D] f32 row-major; ids i32 [M] (the caller
 * guarantees 0 <= id < V); y [M,D] f32 row-major. Numerics: y = t * scale (t the table value as
 * stored); no FMA. Bit-exact with km_embedding_f32__ref: the same f32 operations in the same order,
 * lane by lane. Partition: rows m (km_part over M).
 */
#include "km_common.h"
#include "km_simd.h"

void km_embedding_f32__avx512(float *y, const void *table, const int32_t *ids, int64_t M, int64_t V, int64_t D,
                              float scale, int ith, int nth) {
    (void)V;
    int64_t lo, hi;
    km_part(M, ith, nth, &lo, &hi);
    const __m512 vs = _mm512_set1_ps(scale);
    for (int64_t m = lo; m < hi; m++) {
        const float *row = (const float *)table + (int64_t)ids[m] * D;
        float *out = y + m * D;
        int64_t i = 0;
        for (; i + 16 <= D; i += 16) _mm512_storeu_ps(out + i, _mm512_mul_ps(_mm512_loadu_ps(row + i), vs));
        for (; i < D; i++) out[i] = row[i] * scale;
    }
}
