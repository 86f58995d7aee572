/* embedding/f32_ref.c — km_embedding_f32__ref: the scalar oracle of embedding.f32.f32.v1.
 *
 * Op: y[m][:] = dequant(table[ids[m]]) * scale; table [V,D] f32 row-major; ids i32 [M] (the caller
 * guarantees 0 <= id < V); y [M,D] f32 row-major. Numerics: y = t * scale (t the table value as
 * stored); no FMA. The dequantized value (before the scale) is bit-identical to
 * gguf.quants.dequantize; every variant is bit-exact with this ref. Partition: rows m (km_part over
 * M).
 */
#include "km_common.h"

void km_embedding_f32__ref(float *y, const void *table, const int32_t *ids, int64_t M, int64_t V, int64_t D,
                           float scale, int ith, int nth) {
    (void)V;
    int64_t lo, hi;
    km_part(M, ith, nth, &lo, &hi);
    for (int64_t m = lo; m < hi; m++) {
        const float *row = (const float *)table + (int64_t)ids[m] * D;
        for (int64_t i = 0; i < D; i++) y[m * D + i] = row[i] * scale;
    }
}
