/* embedding/float_embedding_body.h — the family body of embedding.<t>.f32.v1 for the float tables (t = f16,
 * bf16, f32), written once against the lanes interface (common/km_lanes.h).
 *
 * Op (interface embedding.lookup.v1): y[m][:] = table[ids[m]] * scale; table [V, D] row-major in t; ids i32
 * [M] (the caller guarantees 0 <= id < V); y [M, D] f32. Numerics (exactly embedding/<t>_ref.c: llama.cpp's
 * get_rows converts halves / bf16 exactly, then the model's f32 scale): y = (f32) t * scale, one f32
 * multiply per element. Nothing crosses elements. Partition: rows m (km_part over M).
 * No schedule parameters; the instantiating file calls kfe_embedding.
 */
#ifndef KM_FLOAT_EMBEDDING_BODY_H
#define KM_FLOAT_EMBEDDING_BODY_H

#include "km_lanes.h"

#define KFE_F16 1
#define KFE_BF16 2
#define KFE_F32 4

KL_INLINE kl_f8 kfe_load(const uint8_t *p, const int fmt) {
    if (fmt == KFE_F32) return kl_f8_loadu((const float *)p);
    if (fmt == KFE_F16) return kl_f8_load_f16((const uint16_t *)p);
    return kl_f8_load_bf16((const uint16_t *)p);
}

static inline void kfe_embedding(float *y, const void *table, const int32_t *ids, int64_t M, int64_t D, float scale,
                                 int ith, int nth, const int fmt) {
    int64_t lo, hi;
    km_part(M, ith, nth, &lo, &hi);
    const int64_t es = fmt == KFE_F32 ? 4 : 2;
    const kl_f8 vs = kl_f8_set1(scale);
    for (int64_t m = lo; m < hi; m++) {
        const uint8_t *row = (const uint8_t *)table + (int64_t)ids[m] * D * es;
        float *out = y + m * D;
        int64_t i = 0;
        for (; i + 8 <= D; i += 8) kl_f8_storeu(out + i, kl_f8_mul(kfe_load(row + i * es, fmt), vs));
        if (i < D) { /* the short tail through a padded copy */
            uint8_t tmp[32] = {0};
            float t8[8];
            memcpy(tmp, row + i * es, (size_t)((D - i) * es));
            kl_f8_storeu(t8, kl_f8_mul(kfe_load(tmp, fmt), vs));
            memcpy(out + i, t8, (size_t)(D - i) * sizeof(float));
        }
    }
}

#endif /* KM_FLOAT_EMBEDDING_BODY_H */
