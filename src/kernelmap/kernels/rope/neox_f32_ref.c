/* rope/neox_f32_ref.c — km_rope_neox_f32__ref: the scalar oracle of contract rope.neox.f32.v1.
 *
 * Op: rotary position embedding, NeoX layout: element i pairs with i + D/2, on x f32 [M, H*D] (row-major, H heads
 * of D values per row; y may alias x). Row m is at position pos + m. D even, D <= 512.
 * Numerics (ggml rope, ext_factor 0, attn_factor 1, no freq factors): theta_scale =
 * powf(freq_base, -2.0f/D); per row, theta starts at (float)(pos + m) and is multiplied by
 * theta_scale (f32) after each pair; pair i uses t = freq_scale * theta, c = cosf(t), s = sinf(t)
 * (libm, computed the same scalar way in every variant). Rotation with one FMA each, as llama.cpp's
 * CPU build evaluates it (checked bit for bit against ggml_rope_ext): y0 = fma(x0, c, -(x1*s)),
 * y1 = fma(x0, s, x1*c). SIMD variants vectorise only the rotation with the same fused operations
 * (vfmsub/vfmadd), so they are bit-exact with ref. Partition: (row, head) items, km_part over
 * M*H; the cos/sin cache is recomputed when the row changes inside a thread's slice.
 */
#include <math.h>

#include "km_common.h"

#define KM_ROPE_DMAX 512

/* cos/sin of theta_i = freq_scale * (pos_f * theta_scale^i), the power taken by repeated f32 multiplication. */
static void rope_cache(float pos_f, float freq_scale, float theta_scale, int64_t half, float *cs, float *sn) {
    float theta = pos_f;
    for (int64_t i = 0; i < half; i++) {
        const float t = freq_scale * theta;
        cs[i] = cosf(t);
        sn[i] = sinf(t);
        theta *= theta_scale;
    }
}

/* One head: pairs (i, i + D/2). */
static void rotate(float *y, const float *x, int64_t half, const float *cs, const float *sn) {
    for (int64_t i = 0; i < half; i++) {
        const float x0 = x[i], x1 = x[i + half];
        y[i] = fmaf(x0, cs[i], -(x1 * sn[i]));
        y[i + half] = fmaf(x0, sn[i], x1 * cs[i]);
    }
}

void km_rope_neox_f32__ref(float *y, const float *x, int64_t M, int64_t H, int64_t D, int64_t pos,
        float freq_base, float freq_scale, int ith, int nth) {
    const float theta_scale = powf(freq_base, -2.0f / (float)D);
    const int64_t half = D / 2;
    float cs[KM_ROPE_DMAX / 2], sn[KM_ROPE_DMAX / 2]; /* [D/2] cache of the current row */
    int64_t lo, hi, row = -1;
    km_part(M * H, ith, nth, &lo, &hi);
    for (int64_t it = lo; it < hi; it++) { /* it: (row, head) item = row * H + head */
        if (it / H != row) {
            row = it / H;
            rope_cache((float)(pos + row), freq_scale, theta_scale, half, cs, sn);
        }
        rotate(y + it * D, x + it * D, half, cs, sn);
    }
}
