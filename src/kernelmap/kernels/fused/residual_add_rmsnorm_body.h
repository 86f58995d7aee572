/* fused/residual_add_rmsnorm_body.h — the family body of residual_add_rmsnorm.f32.v1 and
 * residual_add_rmsnorm_quantize.{q8_0.rne,q8_k}.v1, written once against the lanes interface
 * (common/km_lanes.h); every ISA variant of the three providers is an instantiation of it.
 *
 * Numerics: exactly fused/residual_add_rmsnorm_f32_ref.c, fused/residual_add_rmsnorm_quantize_q8_0_rne_ref.c
 * and fused/residual_add_rmsnorm_quantize_q8_k_ref.c: y = a + b (one f32 add), then rmsnorm.f32.v1 of y
 * (common/km_rownorm.h): h = (y * s) * w; then h itself (f32), or its q8_0 (rne) or q8_k blocks
 * (common/km_actquant.h). Bit-identical with the unfused ops. y may alias a or b; h / q alias nothing.
 * N: any (f32), a multiple of 32 (q8_0), of 256 (q8_k).
 * Partition: rows (km_part over M); a row is one thread's work. No schedule parameters.
 */
#ifndef KM_RESIDUAL_ADD_RMSNORM_BODY_H
#define KM_RESIDUAL_ADD_RMSNORM_BODY_H

#include "km_actquant.h"
#include "km_rownorm.h"

#define KFR_F32 0  /* out: h, f32 [M, N] */
#define KFR_Q8_0 1 /* out: q8_0 blocks [M, N / 32] (rne) */
#define KFR_Q8_K 2 /* out: q8_k blocks [M, N / 256] */

/* The normalised row h = (y * s) * w, as f32 or quantized block by block (kind, a compile-time constant). */
KL_INLINE void kfr_out_row(void *out, const float *yr, const float *w, float s, int64_t N, const int kind) {
    if (kind == KFR_F32) {
        krn_scale_row((float *)out, yr, w, s, N);
    } else if (kind == KFR_Q8_0) {
        const kl_fv vs = kl_fv_set1(s);
        for (int64_t k = 0; k < N; k += KM_QK8_0) {
            kl_fv h[KQA_V32]; /* the block's normalised values */
            for (int j = 0; j < KQA_V32; j++)
                h[j] = krn_norm(kl_fv_loadu(yr + k + j * KL_FV_LANES), vs, kl_fv_loadu(w + k + j * KL_FV_LANES));
            kqa_q8_0_rne((km_block_q8_0 *)out + k / KM_QK8_0, h);
        }
    } else {
        for (int64_t k = 0; k < N; k += KM_QK_K) {
            float h[KM_QK_K]; /* [256] the block's normalised values */
            krn_scale_row(h, yr + k, w + k, s, KM_QK_K);
            kqa_q8_k((km_block_q8_k *)out + k / KM_QK_K, h);
        }
    }
}

static inline void kfr_residual_add_rmsnorm(float *y, void *out, const float *a, const float *b, const float *w, int64_t M,
                                            int64_t N, float eps, int ith, int nth, const int kind) {
    int64_t lo, hi;
    km_part(M, ith, nth, &lo, &hi);
    /* bytes of one row of out */
    const int64_t ob = kind == KFR_F32    ? N * (int64_t)sizeof(float)
                       : kind == KFR_Q8_0 ? N / KM_QK8_0 * (int64_t)sizeof(km_block_q8_0)
                                          : N / KM_QK_K * (int64_t)sizeof(km_block_q8_k);
    for (int64_t m = lo; m < hi; m++) {
        float *yr = y + m * N; /* [N] */
        const float s = krn_scale(krn_add_sumsq(yr, a + m * N, b + m * N, N), N, eps);
        kfr_out_row((uint8_t *)out + m * ob, yr, w, s, N, kind);
    }
}

#endif /* KM_RESIDUAL_ADD_RMSNORM_BODY_H */
