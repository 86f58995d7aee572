/* fused/residual_add_rmsnorm_quantize_q8_k_ref.c — km_residual_add_rmsnorm_quantize_q8_k__ref: the scalar
 * oracle of contract residual_add_rmsnorm_quantize.q8_k.v1.
 *
 * Op: for rows m of a, b f32 [M,N] (row-major), weight w f32 [N]: y = a + b (f32, kept: the residual
 * stream); h = rmsnorm(y) * w as residual_add_rmsnorm.f32.v1 computes it; q = quantize_q8_k(h), rows of
 * N/256 q8_k blocks (292 bytes), as quantize_act.q8_k.v1 computes it. h lives only in a stack buffer of
 * one block. y may alias a or b; q aliases nothing. N % 256 == 0.
 * Numerics: exactly residual_add_rmsnorm.f32.v1 then quantize_act.q8_k.v1, so the fused op is
 * bit-identical with the unfused pair: y*y in f32 summed in f64 into 16 partials by i mod 16, pairwise
 * fold, mean = (float)(sum/N), s = 1/sqrtf(mean + eps), h = (y*s)*w, no FMA. Per block of 256: amax =
 * max |h|, max = h at the first index reaching amax (signed); amax == 0 gives d = 0 and zero quants and
 * bsums; else iscale = -127.0f/max, q = min(127, nearbyintf(iscale*h)) (ties to even), bsums = sums of
 * 16 quants, d = 1.0f/iscale (f32). Inputs must be finite.
 * Partition: rows (km_part over M); a row is one thread's work, so any nth gives the same bytes.
 */
#include <math.h>

#include "km_q8_k_ref.h"

void km_residual_add_rmsnorm_quantize_q8_k__ref(float *y, void *q, const float *a, const float *b, const float *w,
                                                int64_t M, int64_t N, float eps, int ith, int nth) {
    int64_t lo, hi;
    km_part(M, ith, nth, &lo, &hi);
    const int64_t nb = N / KM_QK_K;
    for (int64_t m = lo; m < hi; m++) {
        const float *ar = a + m * N;                      /* [N] */
        const float *br = b + m * N;                      /* [N] */
        float *yr = y + m * N;                            /* [N] */
        km_block_q8_k *qr = (km_block_q8_k *)q + m * nb;  /* [N/256] blocks */
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
            float h[KM_QK_K]; /* [256] normalised values of this block */
            for (int i = 0; i < KM_QK_K; i++) {
                const int64_t k = blk * KM_QK_K + i;
                h[i] = (yr[k] * scale) * w[k];
            }
            km_q8_k_block_ref(h, &qr[blk]);
        }
    }
}
