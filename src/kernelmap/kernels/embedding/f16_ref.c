/* embedding/f16_ref.c — km_embedding_f16__ref: the scalar oracle of embedding.f16.f32.v1.
 *
 * Op: y[m][:] = dequant(table[ids[m]]) * scale; table [V,D] f16 row-major; ids i32 [M] (the caller
 * guarantees 0 <= id < V); y [M,D] f32 row-major. Numerics: y = (f32)h * scale, the half converted
 * exactly; no FMA. The dequantized value (before the scale) is bit-identical to
 * gguf.quants.dequantize; every variant is bit-exact with this ref. Partition: rows m (km_part over
 * M).
 */
#include "km_common.h"

void km_embedding_f16__ref(float *y, const void *table, const int32_t *ids, int64_t M, int64_t V, int64_t D,
                           float scale, int ith, int nth) {
    (void)V;
    int64_t lo, hi;
    km_part(M, ith, nth, &lo, &hi);
    for (int64_t m = lo; m < hi; m++) {
        const km_half *row = (const km_half *)table + (int64_t)ids[m] * D;
        for (int64_t i = 0; i < D; i++) y[m * D + i] = km_fp16_to_fp32(row[i]) * scale;
    }
}
