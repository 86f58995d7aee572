/* km_rownorm.h — the RMS-norm arithmetic of rmsnorm.f32.v1, written once against the lanes interface
 * (km_lanes.h), and shared by the family bodies of every contract that states it: rmsnorm.f32.v1,
 * qk_norm.f32.v1 (a head is a row), residual_add_rmsnorm.f32.v1, residual_add_rmsnorm_quantize.*.v1 and
 * qk_norm_rope.neox.f32.v1 (the <op>/<...>_body.h headers compose these steps).
 *
 * Numerics (exactly rmsnorm/f32_ref.c, llama.cpp's ggml rms_norm then ggml_mul): each square x*x is
 * rounded to f32, widened exactly and added in f64 to partial (i mod 16) in increasing i; the 16 partials
 * fold pairwise (p[j] += p[j + 8], + 4, + 2, + 1); mean = (float)(sum / (double)N);
 * s = 1.0f / sqrtf(mean + eps); y = (x * s) * w, two f32 multiplies, no FMA. The last, partial vector of a
 * row is zero-filled: it adds +0.0 to partials that are never -0.0, which changes nothing.
 */
#ifndef KM_ROWNORM_H
#define KM_ROWNORM_H

#include <math.h>

#include "km_eltwise.h"
#include "km_lanes.h"

/* The contract's sum of squares of x[0, n). */
KL_INLINE double krn_sumsq(const float *x, int64_t n) {
    kl_d16 acc = kl_d16_zero();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int j = 0; j < 16; j += KL_FV_LANES) acc = kl_d16_add_sq(acc, j, kl_fv_loadu(x + i + j));
    if (i < n)
        for (int j = 0; j < 16; j += KL_FV_LANES) acc = kl_d16_add_sq(acc, j, kl_fv_loadn(x + i + j, kel_lanes(n - i - j)));
    return kl_d16_fold(acc);
}

/* y = a + b (one f32 add per element; y may alias a or b) and the contract's sum of squares of y. */
KL_INLINE double krn_add_sumsq(float *y, const float *a, const float *b, int64_t n) {
    kl_d16 acc = kl_d16_zero();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        for (int j = 0; j < 16; j += KL_FV_LANES) {
            const kl_fv v = kl_fv_add(kl_fv_loadu(a + i + j), kl_fv_loadu(b + i + j));
            kl_fv_storeu(y + i + j, v);
            acc = kl_d16_add_sq(acc, j, v);
        }
    }
    if (i < n) {
        for (int j = 0; j < 16; j += KL_FV_LANES) {
            const int c = kel_lanes(n - i - j);
            const kl_fv v = kl_fv_add(kl_fv_loadn(a + i + j, c), kl_fv_loadn(b + i + j, c));
            kl_fv_storen(y + i + j, v, c);
            acc = kl_d16_add_sq(acc, j, v);
        }
    }
    return kl_d16_fold(acc);
}

/* s = 1 / sqrt(mean + eps) of a row of n values whose sum of squares is sum. */
KL_INLINE float krn_scale(double sum, int64_t n, float eps) {
    const float mean = (float)(sum / (double)n);
    return 1.0f / sqrtf(mean + eps);
}

/* One normalised vector: (x * s) * w. */
KL_INLINE kl_fv krn_norm(kl_fv x, kl_fv s, kl_fv w) { return kl_fv_mul(kl_fv_mul(x, s), w); }

/* h[0, n) = (x * s) * w; h may alias x. */
KL_INLINE void krn_scale_row(float *h, const float *x, const float *w, float s, int64_t n) {
    const kl_fv vs = kl_fv_set1(s);
    int64_t i = 0;
    for (; i + KL_FV_LANES <= n; i += KL_FV_LANES) kl_fv_storeu(h + i, krn_norm(kl_fv_loadu(x + i), vs, kl_fv_loadu(w + i)));
    if (i < n) {
        const int c = (int)(n - i);
        kl_fv_storen(h + i, krn_norm(kl_fv_loadn(x + i, c), vs, kl_fv_loadn(w + i, c)), c);
    }
}

/* rmsnorm over rows [0, rows) of n values (km_part over rows; y may alias x). */
KL_INLINE void krn_rows(float *y, const float *x, const float *w, int64_t rows, int64_t n, float eps, int ith,
                        int nth) {
    int64_t lo, hi;
    km_part(rows, ith, nth, &lo, &hi);
    for (int64_t r = lo; r < hi; r++)
        krn_scale_row(y + r * n, x + r * n, w, krn_scale(krn_sumsq(x + r * n, n), n, eps), n);
}

#endif /* KM_ROWNORM_H */
