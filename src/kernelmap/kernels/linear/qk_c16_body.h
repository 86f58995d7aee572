/* linear/qk_c16_body.h — the family body of linear.q4_k.q8_k.ggml.v1 and linear.q2_k.q8_k.ggml.v1 in their N % 8
 * == 0 order (llama.cpp's repacked q4_K / q2_K gemv) on weights in the repacked layouts "q4_k_c16" / "q2_k_c16", and
 * of linear.q3_k.q8_k.ggml.v1 and linear.q6_k.q8_k.ggml.v1 (llama.cpp's vec_dot_q3_K / vec_dot_q6_K orders, every N;
 * kqc16k_group_q3 / kqc16k_group_q6 state them) on "q3_k_c16" / "q6_k_c16" (weights/repack.py states them), written
 * once against the lanes interface (common/km_lanes.h) for 16-lane headers (a group's 16 rows are a vector's 16
 * lanes), the format a compile-time argument.
 *
 * Numerics (exactly linear/<w>_q8_k_ggml_ref.c's repacked order and linear/<w>_q8_k_ggml_c16_ref.c): per output
 * (m, n) acc = accm = +0; for the superblocks b in order, isum = sum_j sc[j] * (sum of sub-block j's code * quant
 * products), imin = sum_j mn[j] * (the activation sum of sub-block j) (exact int32; q4_K 8 sub-blocks of 32, q2_K
 * 16 of 16), fd = f32(fp16(d)) * x.d, fm = f32(fp16(dmin)) * x.d, acc = fma((float)isum, fd, acc),
 * accm = fma((float)imin, fm, accm); y = acc - accm. Lane c is row c of the group, so every float step is the
 * ref's; the int32 sums are exact whatever their order (|isum| < 2^25), and (float) is vcvtdq2ps's round to
 * nearest even, as the ref's cast.
 * Decode and batches below KQG_MIN_M rows: per group and superblock the code vectors are loaded once (q4_K 32, q2_K
 * 16) and their codes masked out (nibbles; 2-bit fields), one kl_iv_dp4 per 4 values of 16 rows, the scales and mins
 * widened from bytes; each activation row runs the group while its bytes are in L1 / L2. Batches of KQG_MIN_M+ rows
 * go to linear/q_k_gemm_body.h's GEMM, whose panels are loaded from these layouts (kqg_pack_c16: no gathers).
 *   KQC16K_PF  decode: software prefetch distance in bytes (to L2) along the thread's groups
 * Partition: groups of 16 output columns (km_part over ceil(N / 16)); no output depends on M or (ith, nth).
 */
#ifndef KM_QK_C16_BODY_H
#define KM_QK_C16_BODY_H

#include "km_kquant.h"
#include "km_lanes.h"

#if KL_FV_LANES != 16 || !defined(KL_IV_LOADU)
#error "linear/qk_c16_body.h needs 16-lane integer vectors with unaligned loads"
#endif

#include "q_k_gemm_body.h"

/* Decode: the record KQC16K_PF bytes past r, to L2 (the thread's groups are one contiguous range). */
KL_INLINE void kqc16k_prefetch(const uint8_t *r, const int rec) {
    for (int o = 0; o < rec; o += 64) kl_prefetch_l2(r + KQC16K_PF + o);
}

/* q4_K: one superblock record r against the q8_K block xb; *is / *im += its isum / imin (16 lanes). */
KL_INLINE void kqc16k_q4(const uint8_t *r, const km_block_q8_k *xb, kl_iv *is, kl_iv *im) {
    for (int k = 0; k < 4; k++) {
        kl_iv lo = kl_iv_zero(), hi = kl_iv_zero();
        for (int t = 0; t < 8; t++) {
            const kl_iv v = kl_iv_loadu(r + 64 * (8 * k + t));
            lo = kl_iv_dp4(lo, kl_iv_nib_lo(v), xb->qs + 64 * k + 4 * t);
            hi = kl_iv_dp4(hi, kl_iv_nib_hi(v), xb->qs + 64 * k + 32 + 4 * t);
        }
        *is = kl_iv_add(*is, kl_iv_mullo(lo, kl_iv_cvt_u8(r + KQG_C16_SC(KL_KQ_Q4_K) + 16 * (2 * k))));
        *is = kl_iv_add(*is, kl_iv_mullo(hi, kl_iv_cvt_u8(r + KQG_C16_SC(KL_KQ_Q4_K) + 16 * (2 * k + 1))));
    }
    for (int j = 0; j < 8; j++)
        *im = kl_iv_add(*im, kl_iv_mullo(kl_iv_cvt_u8(r + KQG_C16_MN + 16 * j),
                                         kl_iv_set1((int32_t)xb->bsums[2 * j] + xb->bsums[2 * j + 1])));
}

/* q2_K: the same; vector 8h + t holds the rows' qs[32h + 4t .. + 3], whose bits 2k, 2k + 1 are values
 * 128h + 32k + 4t + i (sub-block 8h + 2k + t / 4); a scale byte is sc | mn << 4. */
KL_INLINE void kqc16k_q2(const uint8_t *r, const km_block_q8_k *xb, kl_iv *is, kl_iv *im) {
    for (int h = 0; h < 2; h++) {
        kl_iv v[8];
        for (int t = 0; t < 8; t++) v[t] = kl_iv_loadu(r + 64 * (8 * h + t));
        for (int k = 0; k < 4; k++) {
            kl_iv s0 = kl_iv_zero(), s1 = kl_iv_zero();
            for (int t = 0; t < 4; t++) {
                s0 = kl_iv_dp4(s0, kl_iv_srl_and8(v[t], 2 * k, 0x03), xb->qs + 128 * h + 32 * k + 4 * t);
                s1 = kl_iv_dp4(s1, kl_iv_srl_and8(v[t + 4], 2 * k, 0x03), xb->qs + 128 * h + 32 * k + 16 + 4 * t);
            }
            const int j = 8 * h + 2 * k;
            const kl_iv b0 = kl_iv_cvt_u8(r + KQG_C16_SC(KL_KQ_Q2_K) + 16 * j);
            const kl_iv b1 = kl_iv_cvt_u8(r + KQG_C16_SC(KL_KQ_Q2_K) + 16 * (j + 1));
            *is = kl_iv_add(*is, kl_iv_mullo(s0, kl_iv_srl_and8(b0, 0, 0x0F)));
            *is = kl_iv_add(*is, kl_iv_mullo(s1, kl_iv_srl_and8(b1, 0, 0x0F)));
            *im = kl_iv_add(*im, kl_iv_mullo(kl_iv_srl_and8(b0, 4, 0x0F), kl_iv_set1(xb->bsums[j])));
            *im = kl_iv_add(*im, kl_iv_mullo(kl_iv_srl_and8(b1, 4, 0x0F), kl_iv_set1(xb->bsums[j + 1])));
        }
    }
}

/* One activation row x (nb superblocks) against the group at g; nc: its rows to store; pf: prefetch ahead. */
KL_INLINE void kqc16k_group(float *y, int nc, const uint8_t *g, int64_t nb, const km_block_q8_k *x, const int pf,
                            const int fmt) {
    const int rec = KQG_C16_REC(fmt);
    kl_fv acc = kl_fv_zero(), accm = kl_fv_zero();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *r = g + b * rec;
        const km_block_q8_k *xb = &x[b];
        if (pf) kqc16k_prefetch(r, rec);
        kl_iv is = kl_iv_zero(), im = kl_iv_zero();
        if (fmt == KL_KQ_Q2_K) kqc16k_q2(r, xb, &is, &im);
        else kqc16k_q4(r, xb, &is, &im);
        const kl_fv xd = kl_fv_set1(xb->d);
        acc = kl_fv_fma(kl_fv_cvt_iv(is), kl_fv_mul(kl_fv_load_f16((const uint16_t *)(r + KQG_C16_D(fmt))), xd), acc);
        accm = kl_fv_fma(kl_fv_cvt_iv(im), kl_fv_mul(kl_fv_load_f16((const uint16_t *)(r + KQG_C16_D(fmt) + 32)), xd),
                         accm);
    }
    kl_fv_storen(y, kl_fv_sub(acc, accm), nc);
}

/* The vec_dot contracts' end: y = ((acc0 + acc4) + (acc2 + acc6)) + ((acc1 + acc5) + (acc3 + acc7)), lane-wise. */
KL_INLINE void kqc16k_store8(float *y, int nc, const kl_fv acc[8]) {
    const kl_fv s04 = kl_fv_add(acc[0], acc[4]), s26 = kl_fv_add(acc[2], acc[6]);
    const kl_fv s15 = kl_fv_add(acc[1], acc[5]), s37 = kl_fv_add(acc[3], acc[7]);
    kl_fv_storen(y, kl_fv_add(kl_fv_add(s04, s26), kl_fv_add(s15, s37)), nc);
}

/* q3_K (its vec_dot contract): one activation row x against the group at g, as kqc16k_group. Per superblock and
 * contract lane l (values 32c + 4l + i), 16 rows' int32 lanes A[l] = sum_c sc(2c + l / 4) * D(c, l) with D(c, l) =
 * sum_i q * x exact: one vpdpbusd of the stored codes q + 4 (kl_iv_code3 of qs vector 8h + l and hmask vector l,
 * c = 4h + k) seeded with -4 * (the four activations' sum), then one vpdpwssd by the scale (|D| <= 2048: an int16);
 * acc[l] = fma(fp16(d) * x.d, (float)A[l], acc[l]); y = ((acc0 + acc4) + (acc2 + acc6)) + ((acc1 + acc5) + (acc3 +
 * acc7)), lane-wise: each lane the ref's row. */
KL_INLINE void kqc16k_group_q3(float *y, int nc, const uint8_t *g, int64_t nb, const km_block_q8_k *x, const int pf) {
    const int fmt = KL_KQ_Q3_K, rec = KQG_C16_REC(fmt);
    kl_fv acc[8];
    for (int l = 0; l < 8; l++) acc[l] = kl_fv_zero();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *r = g + b * rec;
        const km_block_q8_k *xb = &x[b];
        if (pf) kqc16k_prefetch(r, rec);
        int32_t seed[64] __attribute__((aligned(64))); /* seed[8c + l] = -4 * (x[32c + 4l] + .. + x[32c + 4l + 3]) */
        for (int q = 0; q < 4; q++) kl_iv_store(seed + 16 * q, kl_iv_mullo(kl_iv_sums4(xb->qs + 64 * q), kl_iv_set1(-4)));
        kl_iv a[8];
        for (int l = 0; l < 8; l++) a[l] = kl_iv_zero();
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++) { /* unrolled: every shift count and mask a constant */
                const int c = 4 * h + k;
                const kl_iv s0 = kl_iv_cvt_i8w((const int8_t *)(r + KQG_C16_SC(fmt) + 16 * (2 * c)));
                const kl_iv s1 = kl_iv_cvt_i8w((const int8_t *)(r + KQG_C16_SC(fmt) + 16 * (2 * c + 1)));
#pragma GCC unroll 8
                for (int l = 0; l < 8; l++) {
                    const kl_iv code = kl_iv_code3(kl_iv_loadu(r + 64 * (8 * h + l)), 2 * k,
                                                   kl_iv_loadu(r + KQG_C16_HM + 64 * l), c);
                    const kl_iv d = kl_iv_dp4(kl_iv_set1(seed[8 * c + l]), code, xb->qs + 32 * c + 4 * l);
                    a[l] = kl_iv_dpw(a[l], d, l < 4 ? s0 : s1);
                }
            }
        }
        const kl_fv t = kl_fv_mul(kl_fv_load_f16((const uint16_t *)(r + KQG_C16_D(fmt))), kl_fv_set1(xb->d));
        for (int l = 0; l < 8; l++) acc[l] = kl_fv_fma(t, kl_fv_cvt_iv(a[l]), acc[l]);
    }
    kqc16k_store8(y, nc, acc);
}

/* q6_K (its vec_dot contract): one activation row x against the group at g, as kqc16k_group_q3. Per superblock and
 * contract lane l (values 32c + 4l + i), 16 rows' int32 lanes A[l] = sum_c sc(2c + l / 4) * D(c, l) - 32 *
 * (sc(2l) * bsums(2l) + sc(2l + 1) * bsums(2l + 1)), D(c, l) = sum_i u * x exact: one vpdpbusd of the 6-bit codes u
 * (kqg_code6: two to three operations from the ql and qh vectors) and one vpdpwssd by the scale's low int16 half
 * (0 <= u <= 63, |x| <= 128: |D| <= 32256, an int16); the offset one vpdpwssd of the rows' scale pairs times -32
 * (|.| <= 4096) with the activation's bsums pair. acc[l] = fma(fp16(d) * x.d, (float)A[l], acc[l]), y the reduce8
 * tree, lane-wise: each lane the ref's row. */
KL_INLINE void kqc16k_group_q6(float *y, int nc, const uint8_t *g, int64_t nb, const km_block_q8_k *x, const int pf) {
    const int fmt = KL_KQ_Q6_K, rec = KQG_C16_REC(fmt);
    kl_fv acc[8];
    for (int l = 0; l < 8; l++) acc[l] = kl_fv_zero();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *r = g + b * rec;
        const km_block_q8_k *xb = &x[b];
        if (pf) kqc16k_prefetch(r, rec);
        kl_iv a[8];
        for (int l = 0; l < 8; l++) a[l] = kl_iv_zero();
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            kl_iv s[4][2]; /* scale of c = 4h + q for lanes l < 4 / l >= 4: sc(2c) / sc(2c + 1) in the low halves */
#pragma GCC unroll 4
            for (int q = 0; q < 4; q++) {
                const int c = 4 * h + q;
                const kl_iv pr = kl_iv_cvt_i8p((const int8_t *)(r + KQG_C16_SC(fmt) + 32 * c));
                a[c] = kl_iv_dp2w(a[c], kl_iv_mul16(pr, -32), xb->bsums + 2 * c);
                s[q][0] = kl_iv_lo16(pr);
                s[q][1] = kl_iv_srl32(pr, 16);
            }
#pragma GCC unroll 8
            for (int l = 0; l < 8; l++) {
                kl_iv u[4];
                kqg_code6(u, kl_iv_loadu(r + 64 * (16 * h + l)), kl_iv_loadu(r + 64 * (16 * h + 8 + l)),
                          kl_iv_loadu(r + KQG_C16_QH + 64 * (8 * h + l)));
#pragma GCC unroll 4
                for (int q = 0; q < 4; q++) {
                    const int c = 4 * h + q;
                    const kl_iv d = kl_iv_dp4(kl_iv_zero(), u[q], xb->qs + 32 * c + 4 * l);
                    a[l] = kl_iv_dpw(a[l], d, s[q][l / 4]);
                }
            }
        }
        const kl_fv t = kl_fv_mul(kl_fv_load_f16((const uint16_t *)(r + KQG_C16_D(fmt))), kl_fv_set1(xb->d));
        for (int l = 0; l < 8; l++) acc[l] = kl_fv_fma(t, kl_fv_cvt_iv(a[l]), acc[l]);
    }
    kqc16k_store8(y, nc, acc);
}

/* The whole linear.token_major.v1 call (w in the format's c16 layout, x [M, K] q8_K, y [M, N] f32; q4_K / q2_K:
 * N % 8 == 0 by the map; q3_K / q6_K: every N). */
static inline void kqc16k_linear(float *y, const void *w, const void *x, int64_t M, int64_t N, int64_t K, int ith,
                                 int nth, const int fmt) {
    const int64_t nb = K / KM_QK_K, ng = (N + 15) / 16, gbytes = nb * KQG_C16_REC(fmt);
    int64_t lo, hi;
    km_part(ng, ith, nth, &lo, &hi);
    if (lo >= hi) return;
    const uint8_t *wb = (const uint8_t *)w;
    const km_block_q8_k *xq = (const km_block_q8_k *)x;
    if (M >= KQG_MIN_M) { /* prefill: the GEMM on panels loaded from this layout */
        kqg_drive(y, wb, xq, M, N, nb, 16 * lo, 16 * hi < N ? 16 * hi : N, fmt, 1);
        return;
    }
    for (int64_t g = lo; g < hi; g++) {
        const int nc = N - 16 * g >= 16 ? 16 : (int)(N - 16 * g);
        for (int64_t m = 0; m < M; m++) { /* rows after the first read the group from cache */
            if (fmt == KL_KQ_Q3_K) kqc16k_group_q3(y + m * N + 16 * g, nc, wb + g * gbytes, nb, xq + m * nb, m == 0);
            else if (fmt == KL_KQ_Q6_K)
                kqc16k_group_q6(y + m * N + 16 * g, nc, wb + g * gbytes, nb, xq + m * nb, m == 0);
            else kqc16k_group(y + m * N + 16 * g, nc, wb + g * gbytes, nb, xq + m * nb, m == 0, fmt);
        }
    }
}

#endif /* KM_QK_C16_BODY_H */
