/* fused/qk_norm_rope_neox_f32_ref.c — km_qk_norm_rope_neox_f32__ref: the scalar oracle of contract
 * qk_norm_rope.neox.f32.v1.
 *
 * Op: per-head RMS norm then NeoX rotary embedding, on x f32 [M, H*D] (row-major, H heads of D values
 * per row), weight w f32 [D] shared by all heads; y f32 [M, H*D] may alias x. Row m is at position
 * pos + m. D even, D <= 512.
 * Numerics: exactly qk_norm.f32.v1 followed by rope.neox.f32.v1, so the fused op is bit-identical with
 * the unfused pair. Norm: x*x rounded to f32, summed in f64 into 16 partials by index mod 16, pairwise
 * fold 8/4/2/1, mean = (float)(sum/D), s = 1/sqrtf(mean + eps), t = (x*s)*w[d], no FMA. RoPE:
 * theta_scale = powf(freq_base, -2.0f/D); per row theta starts at (float)(pos + m) and is multiplied
 * by theta_scale after each pair; pair i uses c = cosf(freq_scale*theta), s = sinf(freq_scale*theta);
 * y0 = fma(t0, c, -(t1*s)), y1 = fma(t0, s, t1*c) with pairs (i, i + D/2) — one FMA each, as the rope
 * contract states. The normalised head lives only in a stack buffer.
 * Partition: (row, head) items, km_part over M*H; results identical for every nth.
 */
#include <math.h>

#include "km_common.h"

#define KM_ROPE_DMAX 512

static void rope_cache(float pos_f, float freq_scale, float theta_scale, int64_t half, float *cs, float *sn) {
    float theta = pos_f;
    for (int64_t i = 0; i < half; i++) {
        const float t = freq_scale * theta;
        cs[i] = cosf(t);
        sn[i] = sinf(t);
        theta *= theta_scale;
    }
}

void km_qk_norm_rope_neox_f32__ref(float *y, const float *x, const float *w, int64_t M, int64_t H, int64_t D,
                                   int64_t pos, float eps, float freq_base, float freq_scale, int ith, int nth) {
    const float theta_scale = powf(freq_base, -2.0f / (float)D);
    const int64_t half = D / 2;
    float cs[KM_ROPE_DMAX / 2], sn[KM_ROPE_DMAX / 2]; /* [D/2] cache of the current row */
    float t[KM_ROPE_DMAX];                            /* [D] the normalised head */
    int64_t lo, hi, row = -1;
    km_part(M * H, ith, nth, &lo, &hi);
    for (int64_t it = lo; it < hi; it++) { /* it: (row, head) item = row * H + head */
        if (it / H != row) {
            row = it / H;
            rope_cache((float)(pos + row), freq_scale, theta_scale, half, cs, sn);
        }
        const float *xr = x + it * D; /* [D] */
        float *yr = y + it * D;       /* [D] */
        double part[16] = {0.0};
        for (int64_t i = 0; i < D; i++) {
            const float sq = xr[i] * xr[i];
            part[i & 15] += (double)sq;
        }
        for (int s = 8; s >= 1; s >>= 1) {
            for (int j = 0; j < s; j++) part[j] += part[j + s];
        }
        const float mean = (float)(part[0] / (double)D);
        const float scale = 1.0f / sqrtf(mean + eps);
        for (int64_t i = 0; i < D; i++) t[i] = (xr[i] * scale) * w[i];
        for (int64_t i = 0; i < half; i++) {
            const float x0 = t[i], x1 = t[i + half];
            yr[i] = fmaf(x0, cs[i], -(x1 * sn[i]));
            yr[i + half] = fmaf(x0, sn[i], x1 * cs[i]);
        }
    }
}
