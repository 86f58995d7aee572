/* rope/rope_body.h — the family body of rope.neox.f32.v1 and rope.normal.f32.v1, and with frequency factors of
 * rope_ff.neox.f32.v1 and rope_ff.normal.f32.v1 (llama.cpp's rope_freqs, Llama 3), written once against the
 * lanes interface (common/km_lanes.h); every ISA variant of the four providers is an instantiation of it.
 *
 * Numerics: exactly rope/neox_f32_ref.c and rope/normal_f32_ref.c, and rope/rope_ff_ref.h with factors f
 * (the order is in common/km_rope.h: libm cos/sin of the ref's f32 theta chain, the angle
 * freq_scale * theta or freq_scale * (theta / f[i]), then y0 = fma(x0, c, -(x1 * s)), y1 = fma(x0, s, x1 * c);
 * one lane per value, so the vector width cannot change a bit).
 * Op: x f32 [M, H*D] row-major (H heads of D values; y may alias x), row m at position pos + m.
 * Partition: (row, head) items, km_part over M*H; the tables are fetched when the row changes inside a
 * thread's slice (without factors from the thread's memo, common/km_rope.h, or made). No schedule parameters.
 */
#ifndef KM_ROPE_BODY_H
#define KM_ROPE_BODY_H

#include "km_rope.h"

/* f: the D/2 frequency factors (rope_ff), or NULL (rope). */
static inline void krope_rows_ff(float *y, const float *x, const float *f, int64_t M, int64_t H, int64_t D, int64_t pos,
                                 float freq_base, float freq_scale, int ith, int nth, const int normal) {
    const float theta_scale = krp_theta_scale(freq_base, D);
    krp_tables t; /* the current row's tables */
    int64_t lo, hi, row = -1;
    km_part(M * H, ith, nth, &lo, &hi);
    for (int64_t it = lo; it < hi; it++) { /* it: (row, head) item = row * H + head */
        if (it / H != row) {
            row = it / H;
            if (f) krp_cache_ff(&t, (float)(pos + row), f, freq_scale, theta_scale, D / 2, normal);
            else krp_cache_memo(&t, (float)(pos + row), freq_scale, theta_scale, D / 2, normal);
        }
        krp_rotate(y + it * D, x + it * D, D, &t, normal);
    }
}

static inline void krope_rows(float *y, const float *x, int64_t M, int64_t H, int64_t D, int64_t pos, float freq_base,
                              float freq_scale, int ith, int nth, const int normal) {
    krope_rows_ff(y, x, NULL, M, H, D, pos, freq_base, freq_scale, ith, nth, normal);
}

#endif /* KM_ROPE_BODY_H */
