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

#include "km_common.h"

static void quantize_block(const float *h, km_block_q8_k *q) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < KM_QK_K; j++) {
        const float ax = fabsf(h[j]);
        if (ax > amax) {
            amax = ax;
            max = h[j];
        }
    }
    if (amax == 0.0f) {
        q->d = 0.0f;
        memset(q->qs, 0, sizeof q->qs);
        memset(q->bsums, 0, sizeof q->bsums);
        return;
    }
    const float iscale = -127.0f / max;
    for (int j = 0; j < KM_QK_K; j++) {
        const int v = (int)nearbyintf(iscale * h[j]);
        q->qs[j] = (int8_t)(v < 127 ? v : 127);
    }
    for (int g = 0; g < KM_QK_K / 16; g++) {
        int32_t s = 0;
        for (int l = 0; l < 16; l++) s += q->qs[16 * g + l];
        q->bsums[g] = (int16_t)s;
    }
    q->d = 1.0f / iscale;
}

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
            quantize_block(h, &qr[blk]);
        }
    }
}
