/* fused/residual_add_rmsnorm_quantize_q8_0_rne_ref.c — km_residual_add_rmsnorm_quantize_q8_0_rne__ref: the scalar
 * oracle of contract residual_add_rmsnorm_quantize.q8_0.rne.v1.
 *
 * Op: for rows m of a, b f32 [M,N] (row-major), weight w f32 [N]: y = a + b (f32, kept: the residual
 * stream); h = rmsnorm(y) * w as residual_add_rmsnorm.f32.v1 computes it; q = quantize_q8_0(h), rows of
 * N/32 q8_0 blocks (34 bytes), as quantize_act.q8_0.rne.v1 computes it. h itself is never stored.
 * y may alias a or b; q aliases nothing. N % 32 == 0.
 * Numerics: exactly residual_add_rmsnorm.f32.v1 then quantize_act.q8_0.rne.v1, so the fused op is
 * bit-identical with the unfused pair: y*y in f32 summed in f64 into 16 partials by i mod 16, pairwise
 * fold, mean = (float)(sum/N), s = 1/sqrtf(mean + eps), h = (y*s)*w, no FMA; per block of 32:
 * amax = max |h| (f32), d = amax/127.0f, id = amax != 0 ? 127.0f/amax : 0 (not 1/d), q.d = fp16(d)
 * (nearest even), q.qs = (int8)rintf(h*id) in the default rounding mode (halves to even) — llama.cpp's
 * x86 activation rule, which quantize_act.q8_0.rne.v1 states. Inputs must be finite.
 * Partition: rows (km_part over M); a row is one thread's work, so any nth gives the same bytes.
 */
#include <math.h>

#include "km_common.h"

void km_residual_add_rmsnorm_quantize_q8_0_rne__ref(float *y, void *q, const float *a, const float *b, const float *w,
                                                int64_t M, int64_t N, float eps, int ith, int nth) {
    int64_t lo, hi;
    km_part(M, ith, nth, &lo, &hi);
    const int64_t nb = N / KM_QK8_0;
    for (int64_t m = lo; m < hi; m++) {
        const float *ar = a + m * N;                      /* [N] */
        const float *br = b + m * N;                      /* [N] */
        float *yr = y + m * N;                            /* [N] */
        km_block_q8_0 *qr = (km_block_q8_0 *)q + m * nb;  /* [N/32] blocks */
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
        for (int64_t blk = 0; blk < nb; blk++) {
            float h[KM_QK8_0]; /* [32] normalised values of this block */
            float amax = 0.0f;
            for (int i = 0; i < KM_QK8_0; i++) {
                const int64_t k = blk * KM_QK8_0 + i;
                h[i] = (yr[k] * scale) * w[k];
                const float ab = fabsf(h[i]);
                if (ab > amax) amax = ab;
            }
            const float d = amax / 127.0f;
            const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
            qr[blk].d = km_fp32_to_fp16(d);
            for (int i = 0; i < KM_QK8_0; i++) qr[blk].qs[i] = (int8_t)rintf(h[i] * id);
        }
    }
}
