/* qk_norm/f32_ref.c — km_qk_norm_f32__ref: the scalar oracle of contract qk_norm.f32.v1.
 *
 * Op: per-head RMS norm. x f32 [M, H*D] row-major is viewed as M*H heads of D values; each head is
 * normalised exactly as rmsnorm.f32.v1 normalises a row of N = D values (x*x rounded to f32, summed in
 * f64 into 16 partials by index mod 16, pairwise fold 8/4/2/1, mean = (float)(sum/D),
 * s = 1/sqrtf(mean + eps), y = (x*s)*w[d]), weight w f32 [D] shared by all heads; y may alias x.
 * This is ggml_rms_norm over dim 0 of the [D, H, M] view followed by ggml_mul with w, as llama.cpp's
 * QK-norm does. Any D >= 1. No FMA. Partition: (row, head) items, km_part over M*H; one thread per
 * head, so results are identical for every nth.
 */
#include <math.h>

#include "km_common.h"

void km_qk_norm_f32__ref(float *y, const float *x, const float *w, int64_t M, int64_t H, int64_t D,
        float eps, int ith, int nth) {
    int64_t lo, hi;
    km_part(M * H, ith, nth, &lo, &hi);
    const int64_t N = D;
    for (int64_t m = lo; m < hi; m++) /* m: (row, head) item = row * H + head */ {
        const float *xr = x + m * N; /* [D]: one head */
        float *yr = y + m * N;       /* [D]: one head */
        double part[16] = {0.0};
        for (int64_t i = 0; i < N; i++) {
            const float sq = xr[i] * xr[i];
            part[i & 15] += (double)sq;
        }
        for (int s = 8; s >= 1; s >>= 1) {
            for (int j = 0; j < s; j++) part[j] += part[j + s];
        }
        const float mean = (float)(part[0] / (double)N);
        const float scale = 1.0f / sqrtf(mean + eps);
        for (int64_t i = 0; i < N; i++) yr[i] = (xr[i] * scale) * w[i];
    }
}
