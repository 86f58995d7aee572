/* rope/rope_ff_ref.h — the body of contracts rope_ff.normal.f32.v1 and rope_ff.neox.f32.v1 (ref variants).
 *
 * Op: rotary position embedding with per-pair frequency factors f[D/2] (a weight: llama.cpp's
 * rope_freqs tensor, Llama 3's long-context scaling): x f32 [M, H*D] row-major, H heads of D values,
 * row m at position pos + m; y may alias x. Pairs are (2i, 2i + 1) (normal) or (i, i + D/2) (NeoX).
 * Numerics, ggml's rope with freq factors, ext_factor 0 and attn_factor 1, step by step:
 * theta_scale = powf(freq_base, -2.0f/D); per row theta starts at (float)(pos + m) and is multiplied
 * by theta_scale (f32) after each pair; pair i uses t = freq_scale * (theta / f[i]) (f32 divide, then
 * multiply), c = cosf(t), s = sinf(t) (libm; the attn_factor 1 multiply is exact and omitted);
 * y0 = fmaf(x0, c, -(x1*s)), y1 = fmaf(x0, s, x1*c) (llama.cpp's CPU build contracts these).
 * With f[i] = 1 the result is bit-identical to rope.normal/neox.f32.v1 (theta/1 == theta).
 * Partition: (row, head) items, km_part over M*H; the cos/sin cache is recomputed per row.
 */
#ifndef KM_ROPE_FF_REF_H
#define KM_ROPE_FF_REF_H

#include <math.h>

#include "km_common.h"

#define KM_ROPE_FF_DMAX 512

/* stride: 1 = normal pairs (2i, 2i+1), 0 = NeoX pairs (i, i + D/2). */
static inline void km_rope_ff_run(float *y, const float *x, const float *f, int64_t M, int64_t H, int64_t D,
        int64_t pos, float freq_base, float freq_scale, int ith, int nth, int normal) {
    const float theta_scale = powf(freq_base, -2.0f / (float)D);
    const int64_t half = D / 2;
    float cs[KM_ROPE_FF_DMAX / 2], sn[KM_ROPE_FF_DMAX / 2]; /* [D/2] cache of the current row */
    int64_t lo, hi, row = -1;
    km_part(M * H, ith, nth, &lo, &hi);
    for (int64_t it = lo; it < hi; it++) { /* it = row * H + head */
        if (it / H != row) {
            row = it / H;
            float theta = (float)(pos + row);
            for (int64_t i = 0; i < half; i++) {
                const float t = freq_scale * (theta / f[i]);
                cs[i] = cosf(t);
                sn[i] = sinf(t);
                theta *= theta_scale;
            }
        }
        const float *xr = x + it * D;
        float *yr = y + it * D;
        for (int64_t i = 0; i < half; i++) {
            const int64_t a = normal ? 2 * i : i, b = normal ? 2 * i + 1 : i + half;
            const float x0 = xr[a], x1 = xr[b];
            yr[a] = fmaf(x0, cs[i], -(x1 * sn[i]));
            yr[b] = fmaf(x0, sn[i], x1 * cs[i]);
        }
    }
}

#endif /* KM_ROPE_FF_REF_H */
