/* embedding/bf16_ref.c — km_embedding_bf16__ref: the scalar oracle of embedding.bf16.f32.v1.
 *
 * Op: y[m][:] = table[ids[m]] * scale; table [V,D] bf16 row-major; ids i32 [M] (the caller guarantees
 * 0 <= id < V); y [M,D] f32 row-major. Numerics: y = (f32)b * scale, the bf16 widened exactly (bits << 16,
 * as llama.cpp's get_rows converts it), one f32 multiply. Every variant is bit-exact with this ref.
 * Partition: rows m (km_part over M).
 */
#include "km_common.h"

void km_embedding_bf16__ref(float *y, const void *table, const int32_t *ids, int64_t M, int64_t V, int64_t D,
                            float scale, int ith, int nth) {
    (void)V;
    int64_t lo, hi;
    km_part(M, ith, nth, &lo, &hi);
    for (int64_t m = lo; m < hi; m++) {
        const uint16_t *row = (const uint16_t *)table + (int64_t)ids[m] * D;
        for (int64_t i = 0; i < D; i++) {
            const uint32_t u = (uint32_t)row[i] << 16;
            float f;
            memcpy(&f, &u, 4);
            y[m * D + i] = f * scale;
        }
    }
}
