/* embedding/embedding_body.h — the family body of embedding.{f32,f16,q8_0,q5_0}.f32.v1 (tables whose value
 * is one element, or one element code times its block's f16 scale), written once against the lanes
 * interface (common/km_lanes.h); every ISA variant of the four providers is an instantiation of it.
 *
 * Op (interface embedding.lookup.v1): y[m][:] = dequant(table[ids[m]]) * scale; ids i32 [M] (the caller
 * guarantees 0 <= id < V); y [M, D] f32 row-major; q8_0 / q5_0 rows are D / 32 ggml blocks.
 * Numerics: exactly embedding/<t>_ref.c: f32 y = t * scale; f16 y = (f32)h * scale (exact widening);
 * q8_0 / q5_0 y = (d * (f32)q) * scale with d = fp16(block d), q the element's integer (q5_0: code - 16),
 * two f32 multiplies, no FMA. Nothing crosses elements, so the lane width cannot change a bit.
 * Partition: rows m (km_part over M). No schedule parameters.
 */
#ifndef KM_EMBEDDING_BODY_H
#define KM_EMBEDDING_BODY_H

#include "km_eltwise.h"

#define KEM_F32 0
#define KEM_F16 1
#define KEM_Q8_0 2
#define KEM_Q5_0 3

/* One row of a float table (f32 or f16) into out. */
KL_INLINE void kem_float_row(float *out, const void *row, int64_t D, kl_fv vs, const int fmt) {
    const float *r32 = (const float *)row;
    const km_half *r16 = (const km_half *)row;
    int64_t i = 0;
    for (; i + KL_FV_LANES <= D; i += KL_FV_LANES)
        kl_fv_storeu(out + i, kl_fv_mul(fmt == KEM_F16 ? kl_fv_load_f16(r16 + i) : kl_fv_loadu(r32 + i), vs));
    if (i < D) {
        const int n = (int)(D - i);
        km_half pad[KL_FV_LANES] = {0};
        if (fmt == KEM_F16) memcpy(pad, r16 + i, (size_t)n * sizeof(km_half));
        kl_fv_storen(out + i, kl_fv_mul(fmt == KEM_F16 ? kl_fv_load_f16(pad) : kl_fv_loadn(r32 + i, n), vs), n);
    }
}

/* One row of a 32-element block table (q8_0 or q5_0) into out. */
KL_INLINE void kem_block_row(float *out, const uint8_t *row, int64_t D, kl_fv vs, const int fmt) {
    const int64_t wblk = fmt == KEM_Q8_0 ? (int64_t)sizeof(km_block_q8_0) : (int64_t)sizeof(km_block_q5_0);
    for (int64_t b = 0; b < D / 32; b++) {
        const uint8_t *blk = row + b * wblk;
        int8_t q5[32];
        const int8_t *q = (const int8_t *)(blk + 2);
        if (fmt == KEM_Q5_0) {
            kl_q5_0_i8(q5, blk);
            q = q5;
        }
        km_half h;
        memcpy(&h, blk, 2);
        const kl_fv vd = kl_fv_set1(km_fp16_to_fp32(h));
        for (int j = 0; j < 32; j += KL_FV_LANES)
            kl_fv_storeu(out + 32 * b + j, kl_fv_mul(kl_fv_mul(vd, kl_fv_cvt_i8(q + j)), vs));
    }
}

static inline void kem_embedding(float *y, const void *table, const int32_t *ids, int64_t M, int64_t V, int64_t D,
                                 float scale, int ith, int nth, const int fmt) {
    int64_t lo, hi;
    km_part(M, ith, nth, &lo, &hi);
    (void)V;
    const int64_t rowbytes = fmt == KEM_F32    ? D * (int64_t)sizeof(float)
                             : fmt == KEM_F16  ? D * (int64_t)sizeof(km_half)
                             : fmt == KEM_Q8_0 ? D / 32 * (int64_t)sizeof(km_block_q8_0)
                                               : D / 32 * (int64_t)sizeof(km_block_q5_0);
    const kl_fv vs = kl_fv_set1(scale);
    for (int64_t m = lo; m < hi; m++) {
        const uint8_t *row = (const uint8_t *)table + (int64_t)ids[m] * rowbytes;
        if (fmt == KEM_F32 || fmt == KEM_F16) kem_float_row(y + m * D, row, D, vs, fmt);
        else kem_block_row(y + m * D, row, D, vs, fmt);
    }
}

#endif /* KM_EMBEDDING_BODY_H */
