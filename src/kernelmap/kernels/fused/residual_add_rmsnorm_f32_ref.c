/* fused/residual_add_rmsnorm_f32_ref.c — km_residual_add_rmsnorm_f32__ref: the scalar oracle of contract
 * residual_add_rmsnorm.f32.v1.
 *
 * Op: for rows m of a, b f32 [M,N] (row-major) and weight w f32 [N]:
 *   y[m][i] = a[m][i] + b[m][i]                      (kept: the residual stream)
 *   h[m][i] = (y[m][i] * s_m) * w[i],  s_m = 1.0f / sqrtf(mean_m + eps)
 * y may alias a or b (in place); h aliases nothing. Any N >= 1.
 * Numerics: exactly residual_add.f32.v1 followed by rmsnorm.f32.v1 on its output, so the fused op is
 * bit-identical with the unfused pair: one f32 add per element; each square y*y rounded to f32 and
 * summed in f64 with element i in partial (i mod 16), increasing i, partials folded pairwise
 * (p[j] += p[j+8], +4, +2, +1); mean_m = (float)(sum / (double)N). No FMA.
 * Partition: rows (km_part over M); one thread reduces a whole row, so any nth gives the same bytes.
 */
#include <math.h>

#include "km_common.h"

void km_residual_add_rmsnorm_f32__ref(float *y, float *h, const float *a, const float *b, const float *w,
                                      int64_t M, int64_t N, float eps, int ith, int nth) {
    int64_t lo, hi;
    km_part(M, ith, nth, &lo, &hi);
    for (int64_t m = lo; m < hi; m++) {
        const float *ar = a + m * N; /* [N] */
        const float *br = b + m * N; /* [N] */
        float *yr = y + m * N;       /* [N] */
        float *hr = h + m * N;       /* [N] */
        double part[16] = {0.0};
        for (int64_t i = 0; i < N; i++) {
            const float v = ar[i] + br[i];
            yr[i] = v;
            const float sq = v * v;
            part[i & 15] += (double)sq;
        }
        for (int s = 8; s >= 1; s >>= 1) {
            for (int j = 0; j < s; j++) part[j] += part[j + s];
        }
        const float mean = (float)(part[0] / (double)N);
        const float scale = 1.0f / sqrtf(mean + eps);
        for (int64_t i = 0; i < N; i++) hr[i] = (yr[i] * scale) * w[i];
    }
}
