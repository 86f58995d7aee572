/* linear/q8_0_c16_body.h — the family body of linear.q8_0.q8_0.ggml.v1 on weights in the repacked layout
 * "q8_0_c16" (weights/repack.py states it), written once against the lanes interface (common/km_lanes.h) for
 * 16-lane headers (a group's 16 rows are a vector's 16 lanes).
 *
 * Numerics (exactly linear/q8_0_q8_0_ggml_ref.c and linear/q8_0_q8_0_ggml_c16_ref.c): per output (m, n) eight f32
 * chains acc[l] = +0; for the blocks b in order lane[l] = the exact int32 sum of the four products at 4l..4l+3,
 * t = f32(fp16(w.d) * fp16(x.d)), acc[l] = fma(t, (float)lane[l], acc[l]); y = ((acc0 + acc4) + (acc2 + acc6)) +
 * ((acc1 + acc5) + (acc3 + acc7)). Vector lane c is row c of a 16-row group, so chain l of 16 outputs is one
 * vector: no float operation crosses outputs, and the fold is three vertical adds per group. The layout stores
 * w + 128 as an unsigned byte, so one integer dot (kl_iv_dp4: vpdpbusd) of a 64-byte code vector against the
 * activation's four quants, seeded with KL_MAGIC_I - 128 * (those four quants' sum) (kl_q32_seeds), gives
 * KL_MAGIC_I + lane exactly (|lane| <= 4 * 128 * 127 < 2^22), and kl_fv_unmagic its exact float. A q8_0 code reaches
 * 255, so kl_iv_dp4 must be exact for every unsigned byte: instantiate on VNNI lanes only (as q8_0 in
 * linear/q32_gemm_body.h).
 *
 * Schedule (the instantiating file defines these, and linear/q32_gemm_body.h's KQ32G_* for the prefill GEMM):
 *   KQC16_PF  decode: software prefetch distance in bytes along the thread's groups, one contiguous range
 *   KQC16_PFL1 decode: 1 prefetches into L1 (kl_prefetch_l1), 0 (the default) into L2 (kl_prefetch_l2)
 * Batches of M >= KQ32G_MIN_M go to linear/q32_gemm_body.h's GEMM, whose panels are loaded from this layout as they
 * are (kq32g_pack_c16: one load per contract lane, one f16 conversion per block); smaller batches run each group
 * for every activation row in turn while its bytes are in L1 / L2.
 * Partition: groups of 16 output columns (km_part over ceil(N / 16)); no output depends on M or (ith, nth).
 */
#ifndef KM_Q8_0_C16_BODY_H
#define KM_Q8_0_C16_BODY_H

#include "km_lanes.h"

#if KL_FV_LANES != 16 || !defined(KL_IV_LOADU)
#error "linear/q8_0_c16_body.h needs 16-lane integer vectors with unaligned loads"
#endif

#include "q32_gemm_body.h"

#ifndef KQC16_PFL1
#define KQC16_PFL1 0
#endif
#define KQC16_PFH(p) (KQC16_PFL1 ? kl_prefetch_l1(p) : kl_prefetch_l2(p))

#define KQC16_XBLK 34 /* the q8_0 activation block */

/* One activation row x (its first block) against the group at g (nb blocks); nc: its rows to store; pf: prefetch
 * the thread's range KQC16_PF bytes ahead, into L1 or L2 by KQC16_PFL1 (the group's bytes spread evenly over its
 * blocks). */
KL_INLINE void kqc16_group(float *y, int nc, const uint8_t *g, int64_t nb, const uint8_t *x, const int pf) {
    const int64_t s = KQC16_SBYTES(nb), gbytes = s + 512 * nb;
    kl_fv acc[8];
    for (int l = 0; l < 8; l++) acc[l] = kl_fv_zero();
    int64_t pfo = 0; /* bytes of the group prefetched so far */
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *xb = x + b * KQC16_XBLK;
        const int8_t *xs = (const int8_t *)(xb + 2);
        int32_t sd[8] __attribute__((aligned(32)));
        kl_q32_seeds(sd, xs, 128);
        if (pf)
            for (const int64_t e = (b + 1) * gbytes / nb; pfo < e; pfo += 64) KQC16_PFH(g + KQC16_PF + pfo);
        const kl_fv t = kl_fv_mul(kl_fv_load_f16((const uint16_t *)(g + 32 * b)), kl_fv_set1(kl_f32_f16(xb)));
        for (int l = 0; l < 8; l++) {
            const kl_iv iv = kl_iv_dp4(kl_iv_set1(sd[l]), kl_iv_loadu(g + s + 512 * b + 64 * l), xs + 4 * l);
            acc[l] = kl_fv_fma(t, kl_fv_unmagic(iv), acc[l]);
        }
    }
    const kl_fv g0 = kl_fv_add(kl_fv_add(acc[0], acc[4]), kl_fv_add(acc[2], acc[6]));
    const kl_fv g1 = kl_fv_add(kl_fv_add(acc[1], acc[5]), kl_fv_add(acc[3], acc[7]));
    kl_fv_storen(y, kl_fv_add(g0, g1), nc);
}

/* The whole linear.token_major.v1 call (w in "q8_0_c16", x [M, K] q8_0, y [M, N] f32). */
static inline void kqc16_linear(float *y, const void *w, const void *x, int64_t M, int64_t N, int64_t K, int ith,
                                int nth) {
    const int64_t nb = K / 32, ng = (N + 15) / 16, gbytes = KQC16_SBYTES(nb) + 512 * nb;
    int64_t lo, hi;
    km_part(ng, ith, nth, &lo, &hi);
    if (lo >= hi) return;
    const uint8_t *wb = (const uint8_t *)w, *xb = (const uint8_t *)x;
    if (M >= KQ32G_MIN_M) { /* prefill: the GEMM on panels loaded from this layout */
        kq32g_linear(y, wb, xb, M, N, nb, 16 * lo, 16 * hi < N ? 16 * hi : N, KL_Q32_Q8_0, 0, KQ32G_C16);
        return;
    }
    for (int64_t g = lo; g < hi; g++) {
        const int nc = N - 16 * g >= 16 ? 16 : (int)(N - 16 * g);
        for (int64_t m = 0; m < M; m++) /* rows after the first read the group from cache */
            kqc16_group(y + m * N + 16 * g, nc, wb + g * gbytes, nb, xb + m * nb * KQC16_XBLK, m == 0);
    }
}

#endif /* KM_Q8_0_C16_BODY_H */
