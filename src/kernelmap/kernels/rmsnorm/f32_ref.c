/* rmsnorm/f32_ref.c — km_rmsnorm_f32__ref: the scalar oracle of contract rmsnorm.f32.v1.
 *
 * Op: y[m][i] = (x[m][i] * s_m) * w[i], s_m = 1.0f / sqrtf(mean_m + eps), for rows m of x f32 [M,N]
 * (row-major), weight w f32 [N]; y may alias x. Any N >= 1 (no tail restriction).
 * Numerics (llama.cpp ggml rms_norm followed by ggml_mul): each square x*x is rounded to f32, then
 * summed in f64. The sum order is fixed so SIMD variants can match bit for bit: element i goes to
 * partial (i mod 16), in increasing i; the 16 partials are folded pairwise (p[j] += p[j+8], then +4,
 * +2, +1). mean_m = (float)(sum / (double)N). No FMA anywhere. ggml sums sequentially in f64; the two
 * orders give the same f32 mean except when an f64 rounding difference crosses an f32 rounding
 * boundary (not observed in practice). Gemma's (1 + w) is already baked into w by the converter.
 * Partition: rows (km_part over M); every row is reduced by one thread, so any nth gives the same bytes.
 */
#include <math.h>

#include "km_common.h"

void km_rmsnorm_f32__ref(float *y, const float *x, const float *w, int64_t M, int64_t N, float eps,
                         int ith, int nth) {
    int64_t lo, hi;
    km_part(M, ith, nth, &lo, &hi);
    for (int64_t m = lo; m < hi; m++) {
        const float *xr = x + m * N; /* [N] */
        float *yr = y + m * N;       /* [N] */
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
