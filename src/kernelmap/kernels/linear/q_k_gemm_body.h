/* linear/q_k_gemm_body.h — the prefill schedule of the K-quant linears linear.{q4_k,q2_k}.q8_k.ggml.v1 (the
 * repack contract, N % 8 == 0) and linear.{q6_k,q5_k}.q8_k.ggml.v1 (the vec_dot contract, every N): a
 * register-blocked GEMM over column lanes, written once against the lanes interface (common/km_lanes.h, the
 * w6-gemm names). linear/q_k_repack_ggml_body.h and linear/q_k_vecdot_ggml_body.h call it for M >= KQG_MIN_M
 * when the instantiating file sets the schedule below; decode (M = 1) and short batches keep their loops.
 *
 * Numerics: exactly those bodies' contracts (and the refs linear/<w>_q8_k_ggml_ref.c), restated at each
 * part below: the float steps of every output (m, n) are the ref's; only the way their exact int32 operands
 * are formed differs. Vector lane c is output column c (KL_FV_LANES columns per group), so no operation
 * crosses columns, whatever the group width, M or (ith, nth).
 *
 * Schedule: the thread's columns in groups of KL_FV_LANES; per group and chunk of up to KQG_KB superblocks
 * the weights are unpacked once into a panel (codes as [sub-block][4-value group][column], the scales, the
 * min pairs and the f32 d/dmin per column), then every activation row reads it: tiles of KQG_MT rows
 * whose partial dots stay in registers (one kl_iv_dp4 per row per panel vector), the float accumulators
 * of a super-tile of rows in a buffer between chunks (the panel is re-made per super-tile).
 *   KQG_MT     largest row tile (the tail of M goes in single rows)
 *   KQG_KB     superblocks per panel chunk
 *   KQG_FA     float accumulator rows of the buffer: a super-tile has KQG_FA / KQG_NACC(fmt) rows (1152 = 9 x 128:
 *              a prefill batch of 128 rows is one super-tile for every format, so each panel is unpacked once per
 *              batch; 512 unpacked q6_K's panels twice, and gathers are slow on AMD: q6_K / q5_K +10-25% on Zen 5,
 *              the AVX2 variants +15-30% there)
 *   KQG_MIN_M  smallest M this schedule takes
 *   KQG_RG     optional (lanes with KL_IV_P16; default 4): rows whose int16 sub-block partials are summed together
 *              (one weight vector load per KQG_RG rows; more rows' partials than registers spill)
 */
#ifndef KM_Q_K_GEMM_BODY_H
#define KM_Q_K_GEMM_BODY_H

#include "km_kquant.h"
#include "km_lanes.h"

#define KQG_L KL_FV_LANES

/* ---- the repack contract: q4_K, q2_K (linear.{q4_k,q2_k}.q8_k.ggml.v1, N % 8 == 0) ----
 * isum = sum over the sub-blocks j (q4_K: 8 of 32 values, q2_K: 16 of 16) of sc(j) * dot(j), dot(j) the exact
 * sum of its code * activation products (|isum| < 2^25); imin = sum_j mn(j) * (the activation sum of
 * sub-block j). Values 4g .. 4g + 3 of a block are panel vector q[g]. */

#define KQG_NSUB(fmt) ((fmt) == KL_KQ_Q2_K ? 16 : 8)

/* With 16-bit partial dots (KL_IV_P16) a sub-block's dot is summed in the int16 halves of each lane and widened
 * once, times its scale, by one multiply-add: the panel keeps the scale in both halves. The halves stay exact:
 * q4_K 8 pair products of codes <= 15 and quants >= -128 (|.| <= 8 * 2 * 15 * 128 = 30720), q2_K 4 of codes <= 3
 * (3072). Without it, a 32-bit dot per panel vector and a 32-bit multiply by the scale. */
#ifdef KL_IV_P16
#ifndef KQG_RG
#define KQG_RG 4
#endif
#define KQG_SC(v) ((int32_t)(v) * 0x10001)
#else
#define KQG_SC(v) ((int32_t)(v))
#endif

/* One superblock of a column group, unpacked. */
typedef struct {
    kl_iv q[64];               /* lane c = codes 4g .. 4g + 3 of column c */
    int32_t sc[16][KQG_L];     /* sub-block scales (KQG_SC) */
    int16_t mn[8][2 * KQG_L];  /* lane c of pair p: (min 2p, min 2p + 1) */
    float d[KQG_L], dm[KQG_L]; /* f32 of the column's f16 d and dmin */
} __attribute__((aligned(64))) kqg_blk;

/* Unpack superblocks [b0, b0 + bc) of the nc (<= KQG_L) columns starting at w (row stride wrow). */
KL_INLINE void kqg_pack(kqg_blk *P, const uint8_t *w, int64_t wrow, int64_t b0, int bc, int nc, const int fmt) {
    for (int bb = 0; bb < bc; bb++) {
        kqg_blk *p = &P[bb];
        const uint8_t *blk = w + (b0 + bb) * KL_KQ_WBLK(fmt);
        if (fmt == KL_KQ_Q2_K) { /* value 128h + 32k + i: bits 2k, 2k + 1 of qs[32h + i] (qs at 16) */
            for (int h = 0; h < 2; h++) {
                for (int t = 0; t < 8; t++) {
                    const kl_iv g = kl_iv_gather32(blk + 16 + 32 * h + 4 * t, wrow, nc);
                    for (int k = 0; k < 4; k++) p->q[32 * h + 8 * k + t] = kl_iv_srl_and8(g, 2 * k, 0x03);
                }
            }
        } else { /* q4_K: chunk ch of qs (at 16): low nibbles = values 64ch + i, high = 64ch + 32 + i */
            for (int ch = 0; ch < 4; ch++) {
                for (int t = 0; t < 8; t++) {
                    const kl_iv g = kl_iv_gather32(blk + 16 + 32 * ch + 4 * t, wrow, nc);
                    p->q[16 * ch + t] = kl_iv_nib_lo(g);
                    p->q[16 * ch + 8 + t] = kl_iv_nib_hi(g);
                }
            }
        }
        for (int c = 0; c < KQG_L; c++) {
            uint8_t sc[16], mn[16];
            uint16_t hd = 0, hm = 0;
            memset(sc, 0, sizeof sc);
            memset(mn, 0, sizeof mn);
            if (c < nc) {
                const uint8_t *cb = blk + c * wrow;
                if (fmt == KL_KQ_Q2_K) {
                    for (int j = 0; j < 16; j++) {
                        sc[j] = cb[j] & 0x0F;
                        mn[j] = cb[j] >> 4;
                    }
                    memcpy(&hd, cb + 80, 2);
                    memcpy(&hm, cb + 82, 2);
                } else {
                    km_q4k_scales(cb + 4, sc, mn);
                    memcpy(&hd, cb, 2);
                    memcpy(&hm, cb + 2, 2);
                }
            }
            for (int j = 0; j < KQG_NSUB(fmt); j++) p->sc[j][c] = KQG_SC(sc[j]);
            for (int q = 0; q < KQG_NSUB(fmt) / 2; q++) {
                p->mn[q][2 * c] = mn[2 * q];
                p->mn[q][2 * c + 1] = mn[2 * q + 1];
            }
            p->d[c] = km_fp16_to_fp32(hd);
            p->dm[c] = km_fp16_to_fp32(hm);
        }
    }
}

#if defined(KL_IV_LOADU) && KL_FV_LANES == 16
/* The same unpacking from the repacked layouts q4_k_c16 / q2_k_c16 (weights/repack.py; linear/qk_c16_body.h): a
 * group's records (KQG_C16_REC(fmt) bytes per superblock) hold lane c's qs dwords as vectors, the scales (q4_K: and
 * mins) as bytes and d / dmin as halves, so a superblock is loads, code masks, byte widenings and two f16
 * conversions: no gathers. Pad rows are zero bytes (scale, min, d 0), as kqg_pack's lanes past nc. */
#define KQG_C16_REC(fmt) ((fmt) == KL_KQ_Q2_K ? 1344 : (fmt) == KL_KQ_Q3_K ? 1824 : (fmt) == KL_KQ_Q6_K ? 3360 : 2368)
/* q2_K: the GGUF scale bytes (sc | mn << 4); q3_K: the signed scales as int8; q6_K: the int8 scales in row pairs */
#define KQG_C16_SC(fmt) ((fmt) == KL_KQ_Q2_K ? 1024 : (fmt) == KL_KQ_Q3_K ? 1536 : (fmt) == KL_KQ_Q6_K ? 3072 : 2048)
#define KQG_C16_MN 2176                                     /* q4_K's min bytes */
#define KQG_C16_HM 1024                                     /* q3_K's hmask vectors */
#define KQG_C16_QH 2048                                     /* q6_K's qh vectors */
#define KQG_C16_D(fmt) \
    ((fmt) == KL_KQ_Q2_K ? 1280 : (fmt) == KL_KQ_Q3_K ? 1792 : (fmt) == KL_KQ_Q6_K ? 3328 : 2304) /* d; dmin 32 on */
KL_INLINE kl_iv kqg_c16_sc(kl_iv sc) {
#ifdef KL_IV_P16
    return kl_iv_or(sc, kl_iv_sll32(sc, 16));
#else
    return sc;
#endif
}
KL_INLINE void kqg_pack_c16(kqg_blk *P, const uint8_t *g, int64_t b0, int bc, const int fmt) {
    for (int bb = 0; bb < bc; bb++) {
        kqg_blk *p = &P[bb];
        const uint8_t *r = g + (b0 + bb) * KQG_C16_REC(fmt);
        if (fmt == KL_KQ_Q2_K) {
            for (int h = 0; h < 2; h++) {
                for (int t = 0; t < 8; t++) {
                    const kl_iv v = kl_iv_loadu(r + 64 * (8 * h + t));
                    for (int k = 0; k < 4; k++) p->q[32 * h + 8 * k + t] = kl_iv_srl_and8(v, 2 * k, 0x03);
                }
            }
            kl_iv mn[16];
            for (int j = 0; j < 16; j++) {
                const kl_iv s = kl_iv_cvt_u8(r + KQG_C16_SC(fmt) + 16 * j);
                kl_iv_store(p->sc[j], kqg_c16_sc(kl_iv_srl_and8(s, 0, 0x0F)));
                mn[j] = kl_iv_srl_and8(s, 4, 0x0F);
            }
            for (int q = 0; q < 8; q++) kl_iv_store(p->mn[q], kl_iv_or(mn[2 * q], kl_iv_sll32(mn[2 * q + 1], 16)));
        } else {
            for (int ch = 0; ch < 4; ch++) {
                for (int t = 0; t < 8; t++) {
                    const kl_iv v = kl_iv_loadu(r + 64 * (8 * ch + t));
                    p->q[16 * ch + t] = kl_iv_nib_lo(v);
                    p->q[16 * ch + 8 + t] = kl_iv_nib_hi(v);
                }
            }
            for (int j = 0; j < 8; j++) kl_iv_store(p->sc[j], kqg_c16_sc(kl_iv_cvt_u8(r + KQG_C16_SC(fmt) + 16 * j)));
            for (int q = 0; q < 4; q++) /* lane c: (min 2q, min 2q + 1) as two int16 */
                kl_iv_store(p->mn[q], kl_iv_or(kl_iv_cvt_u8(r + KQG_C16_MN + 32 * q),
                                               kl_iv_sll32(kl_iv_cvt_u8(r + KQG_C16_MN + 32 * q + 16), 16)));
        }
        kl_fv_store(p->d, kl_fv_load_f16((const uint16_t *)(r + KQG_C16_D(fmt))));
        kl_fv_store(p->dm, kl_fv_load_f16((const uint16_t *)(r + KQG_C16_D(fmt) + 32)));
    }
}
#endif

/* MT activation rows x (row stride nb blocks) against the panel's bc superblocks (first b0): the float
 * accumulators fa[2r] (acc) and fa[2r + 1] (accm) of row r, KQG_L floats each, updated in place. */
KL_INLINE void kqg_tile(float (*fa)[KQG_L], const kqg_blk *P, int bc, const km_block_q8_k *x, int64_t nb,
                        int64_t b0, const int fmt, const int MT) {
    const int nsub = KQG_NSUB(fmt), per = 64 / KQG_NSUB(fmt); /* panel vectors per sub-block */
    for (int bb = 0; bb < bc; bb++) {
        const kqg_blk *p = &P[bb];
        const km_block_q8_k *xb[KQG_MT];
        for (int r = 0; r < MT; r++) xb[r] = &x[r * nb + b0 + bb];
        kl_iv is[KQG_MT], im[KQG_MT];
        for (int r = 0; r < MT; r++) is[r] = kl_iv_zero();
#ifdef KL_IV_P16
        /* KQG_RG rows at a time, each row's int16 partials one chain over the sub-block's vectors; the vector loop
         * is unrolled by 4 only (fully unrolled, the compiler re-associated the chains into trees that need every
         * product of the sub-block live, and spilled them: q4_K on one Zen 3 core 60 GMAC/s fully unrolled, 75
         * rolled, 85 by 4) */
        for (int r0 = 0; r0 < MT; r0 += KQG_RG) {
            const int rn = MT - r0 < KQG_RG ? MT - r0 : KQG_RG;
            for (int j = 0; j < nsub; j++) {
                kl_iv sd[KQG_RG];
                for (int r = 0; r < rn; r++) sd[r] = kl_iv_zero();
#pragma GCC unroll 4
                for (int t = 0; t < per; t++) {
                    const kl_iv wq = p->q[per * j + t];
                    for (int r = 0; r < rn; r++) sd[r] = kl_iv_p16(sd[r], wq, xb[r0 + r]->qs + 4 * (per * j + t));
                }
                const kl_iv sc = kl_iv_load(p->sc[j]);
                for (int r = 0; r < rn; r++) is[r0 + r] = kl_iv_madd16(is[r0 + r], sd[r], sc);
            }
        }
#else
        for (int j = 0; j < nsub; j++) {
            kl_iv sd[KQG_MT];
            for (int r = 0; r < MT; r++) sd[r] = kl_iv_zero();
            for (int t = 0; t < per; t++) {
                const kl_iv wq = p->q[per * j + t];
                for (int r = 0; r < MT; r++) sd[r] = kl_iv_dp4(sd[r], wq, xb[r]->qs + 4 * (per * j + t));
            }
            const kl_iv sc = kl_iv_load(p->sc[j]);
            for (int r = 0; r < MT; r++) is[r] = kl_iv_add(is[r], kl_iv_mullo(sd[r], sc));
        }
#endif
        for (int r = 0; r < MT; r++) {
            int16_t ps[8]; /* q4_K: the 32-value sub-blocks' activation sums, |.| <= 32 * 128 */
            const int16_t *as = xb[r]->bsums;
            if (fmt != KL_KQ_Q2_K) {
                for (int j = 0; j < 8; j++) ps[j] = (int16_t)(xb[r]->bsums[2 * j] + xb[r]->bsums[2 * j + 1]);
                as = ps;
            }
            im[r] = kl_iv_zero();
            for (int q = 0; q < nsub / 2; q++) im[r] = kl_iv_dp2w(im[r], kl_iv_load(p->mn[q]), as + 2 * q);
        }
        const kl_fv wd = kl_fv_load(p->d), wm = kl_fv_load(p->dm);
        for (int r = 0; r < MT; r++) {
            const kl_fv xd = kl_fv_set1(xb[r]->d);
            kl_fv_store(fa[2 * r], kl_fv_fma(kl_fv_cvt_iv(is[r]), kl_fv_mul(wd, xd), kl_fv_load(fa[2 * r])));
            kl_fv_store(fa[2 * r + 1], kl_fv_fma(kl_fv_cvt_iv(im[r]), kl_fv_mul(wm, xd), kl_fv_load(fa[2 * r + 1])));
        }
    }
}

/* ---- the vec_dot contracts: q6_K, q5_K, q3_K (linear.{q6_k,q5_k,q3_k}.q8_k.ggml.v1, every N) ----
 * Per output (m, n) eight f32 lanes acc[l] from +0; per superblock b in order, with the codes u(e) and
 * t = f32(fp16(w.d) * x.d):
 *     lane(l) = sum_{c<8} sc(c, l) * sum_{i<4} u(32c + 4l + i) * x(32c + 4l + i)  [+ q6_K's offset]  (exact int32)
 *     acc[l] = fma(t, (float)lane(l), acc[l])
 * q6_K: u 0..63, sc(c, l) = the int8 scale 2c + l / 4, offset -32 * (sc(2l) * bsums(2l) + sc(2l + 1) *
 * bsums(2l + 1)); y = ((acc0 + acc4) + (acc2 + acc6)) + ((acc1 + acc5) + (acc3 + acc7)) (km_kq_reduce8).
 * q5_K: u 0..31, sc(c, l) = the 6-bit scale c; a ninth chain summ = fma((float)imin, -(x.d * f32(fp16(w.dmin))),
 * summ) with q4_K's imin; y = reduce8(acc) + summ.
 * q3_K: u = the signed code q (-4..3), sc(c, l) = the signed 6-bit scale 2c + l / 4; y = reduce8(acc). The
 * panel holds q + 4 (0..7) and the sum gets sc * 4 * (the four activations) subtracted: a second kl_iv_dp4s.
 * The eight acc[l] (and summ) of the KL_FV_LANES columns of a group are column-lane vectors, so every float
 * step is the ref's. One kl_iv_dp4s (pair sums <= 2 * 63 * 128, then times the scale) per row per panel
 * vector. */

typedef struct {
    kl_iv q[8][8];             /* [c][l]: lane = codes 32c + 4l .. + 3 of the column */
    int16_t sc[16][2 * KQG_L]; /* scale j: lane = (sc(j), sc(j)) (q6_K 16 scales, q5_K 8) */
    int16_t off[8][2 * KQG_L]; /* q6_K: lane = (-32 sc(2l), -32 sc(2l + 1)); q5_K: rows 0-3 the min pairs */
    int16_t nsc[16][2 * KQG_L]; /* q3_K: lane = (-sc(j), -sc(j)) */
    float d[KQG_L], dm[KQG_L];
} __attribute__((aligned(64))) kqg6_blk;

/* q3_K's code offset: every byte 4 (the codes are stored as q + 4). */
static const int32_t kqg_fours[KQG_L] __attribute__((aligned(64))) = {
    0x04040404, 0x04040404, 0x04040404, 0x04040404,
#if KQG_L > 4
    0x04040404, 0x04040404, 0x04040404, 0x04040404,
#endif
#if KQG_L > 8
    0x04040404, 0x04040404, 0x04040404, 0x04040404, 0x04040404, 0x04040404, 0x04040404, 0x04040404,
#endif
};

KL_INLINE void kqg6_pack(kqg6_blk *P, const uint8_t *w, int64_t wrow, int64_t b0, int bc, int nc, const int fmt) {
    for (int bb = 0; bb < bc; bb++) {
        kqg6_blk *p = &P[bb];
        const uint8_t *blk = w + (b0 + bb) * KL_KQ_WBLK(fmt);
        if (fmt == KL_KQ_Q6_K) {
            for (int h = 0; h < 2; h++) {         /* 128-value half: ql + 64h, qh + 32h */
                for (int o = 0; o < 32; o += 4) { /* value 128h + 32 qd + o + i: ql nibble qd / 2 of byte o + 32 (qd % 2) */
                    const kl_iv gh = kl_iv_gather32(blk + 128 + 32 * h + o, wrow, nc);
                    for (int half = 0; half < 2; half++) {
                        const kl_iv gl = kl_iv_gather32(blk + 64 * h + o + 32 * half, wrow, nc);
                        for (int hi = 0; hi < 2; hi++) {
                            const int qd = 2 * hi + half;
                            const int e0 = 128 * h + 32 * qd + o;
                            const kl_iv nib = hi ? kl_iv_nib_hi(gl) : kl_iv_nib_lo(gl);
                            p->q[e0 / 32][(e0 % 32) / 4] = kl_iv_or(nib, kl_iv_sll32(kl_iv_srl_and8(gh, 2 * qd, 0x03), 4));
                        }
                    }
                }
            }
        } else if (fmt == KL_KQ_Q3_K) { /* value 128h + 32k + i: bits 2k.. of qs[32h + i] (qs at 32), bit 4h + k of hmask[i] */
            for (int t = 0; t < 8; t++) {
                const kl_iv gh = kl_iv_gather32(blk + 4 * t, wrow, nc);
                for (int h = 0; h < 2; h++) {
                    const kl_iv gl = kl_iv_gather32(blk + 32 + 32 * h + 4 * t, wrow, nc);
                    for (int k = 0; k < 4; k++) /* stored code q + 4: the low bits, + 4 where the high bit is set */
                        p->q[4 * h + k][t] = kl_iv_or(kl_iv_srl_and8(gl, 2 * k, 0x03), kl_iv_sll32(kl_iv_srl_and8(gh, 4 * h + k, 0x01), 2));
                }
            }
        } else { /* q5_K: value 64g + 32s + i: nibble s of qs[32g + i] (qs at 48), fifth bit 2g + s of qh[i] (at 16) */
            for (int o = 0; o < 32; o += 4) {
                const kl_iv gh = kl_iv_gather32(blk + 16 + o, wrow, nc);
                for (int g = 0; g < 4; g++) {
                    const kl_iv gl = kl_iv_gather32(blk + 48 + 32 * g + o, wrow, nc);
                    for (int hi = 0; hi < 2; hi++) {
                        const kl_iv nib = hi ? kl_iv_nib_hi(gl) : kl_iv_nib_lo(gl);
                        p->q[2 * g + hi][o / 4] = kl_iv_or(nib, kl_iv_sll32(kl_iv_srl_and8(gh, 2 * g + hi, 0x01), 4));
                    }
                }
            }
        }
        for (int c = 0; c < KQG_L; c++) {
            int8_t sc[16];
            uint8_t sc5[8], mn5[8];
            uint16_t hd = 0, hm = 0;
            memset(sc, 0, sizeof sc);
            memset(sc5, 0, sizeof sc5);
            memset(mn5, 0, sizeof mn5);
            const uint8_t *cb = blk + c * wrow;
            if (c < nc && fmt == KL_KQ_Q6_K) {
                memcpy(sc, cb + 192, 16);
                memcpy(&hd, cb + 208, 2);
            } else if (c < nc && fmt == KL_KQ_Q3_K) {
                uint64_t lo, hi;
                km_q3k_scales64(cb + 96, &lo, &hi);
                for (int j = 0; j < 16; j++) sc[j] = (int8_t)((int)(((j < 8 ? lo : hi) >> (8 * (j % 8))) & 0xFF) - 32);
                memcpy(&hd, cb + 108, 2);
            } else if (c < nc) {
                km_q4k_scales(cb + 4, sc5, mn5);
                memcpy(&hd, cb, 2);
                memcpy(&hm, cb + 2, 2);
            }
            if (fmt == KL_KQ_Q3_K) {
                for (int j = 0; j < 16; j++) {
                    p->sc[j][2 * c] = p->sc[j][2 * c + 1] = sc[j];
                    p->nsc[j][2 * c] = p->nsc[j][2 * c + 1] = (int16_t)-sc[j];
                }
            } else if (fmt == KL_KQ_Q6_K) {
                for (int j = 0; j < 16; j++) p->sc[j][2 * c] = p->sc[j][2 * c + 1] = sc[j];
                for (int l = 0; l < 8; l++) {
                    p->off[l][2 * c] = (int16_t)(-32 * sc[2 * l]);
                    p->off[l][2 * c + 1] = (int16_t)(-32 * sc[2 * l + 1]);
                }
            } else {
                for (int j = 0; j < 8; j++) p->sc[j][2 * c] = p->sc[j][2 * c + 1] = sc5[j];
                for (int q = 0; q < 4; q++) {
                    p->off[q][2 * c] = mn5[2 * q];
                    p->off[q][2 * c + 1] = mn5[2 * q + 1];
                }
            }
            p->d[c] = km_fp16_to_fp32(hd);
            p->dm[c] = km_fp16_to_fp32(hm);
        }
    }
}

#if defined(KL_IV_LOADU) && KL_FV_LANES == 16
/* q6_K's codes of values 128h + 32q + 4l + i, q = 0..3, from ql vectors 16h + l (qa) and 16h + 8 + l (qb) and qh
 * vector 8h + l (weights/repack.py's q6_k_c16): the low nibbles of qa / qb for q = 0 / 1, the high ones for 2 / 3;
 * qh's bit pair q moved to bits 4-5 from the byte masked to pairs 0 and 2 (0x33) or 1 and 3 (0xCC), so bits 6-7 of
 * the shifted byte are zero (a 32-bit shift moves in only masked-off bits), and one vpternlogd merges the halves. */
KL_INLINE void kqg_code6(kl_iv u[4], kl_iv qa, kl_iv qb, kl_iv qh) {
    const kl_iv m02 = kl_iv_and8(qh, 0x33), m13 = kl_iv_and8(qh, 0xCC);
    u[0] = kl_iv_nib_merge(qa, kl_iv_sll32(m02, 4));
    u[1] = kl_iv_nib_merge(qb, kl_iv_sll32(m13, 2));
    u[2] = kl_iv_nib_merge(kl_iv_srl32(qa, 4), m02);
    u[3] = kl_iv_nib_merge(kl_iv_srl32(qb, 4), kl_iv_srl32(m13, 2));
}

/* q3_K's panel from the repacked layout q3_k_c16 (weights/repack.py; linear/qk_c16_body.h): the codes q + 4 from the
 * qs and hmask vectors (vector 8h + t's bits 2k.. and hmask vector t's bit 4h + k: values 128h + 32k + 4t + i),
 * the signed scale bytes widened to (sc, sc) and (-sc, -sc) pairs, d from the halves; the same panel as kqg6_pack
 * builds from the GGUF layout by gathers (pad rows: codes 0, d 0, scales -32, never stored). q6_K's from q6_k_c16:
 * the codes by kqg_code6, each scale pair s widened once to (sc(2s), sc(2s + 1)), giving off[s] (times -32) and the
 * two (sc, sc) scale pairs (pad rows: all 0, as kqg6_pack's lanes past nc). */
KL_INLINE void kqg6_pack_c16(kqg6_blk *P, const uint8_t *g, int64_t b0, int bc, const int fmt) {
    for (int bb = 0; bb < bc; bb++) {
        kqg6_blk *p = &P[bb];
        const uint8_t *r = g + (b0 + bb) * KQG_C16_REC(fmt);
        if (fmt == KL_KQ_Q6_K) {
            for (int h = 0; h < 2; h++) {
                for (int l = 0; l < 8; l++) {
                    kl_iv u[4];
                    kqg_code6(u, kl_iv_loadu(r + 64 * (16 * h + l)), kl_iv_loadu(r + 64 * (16 * h + 8 + l)),
                              kl_iv_loadu(r + KQG_C16_QH + 64 * (8 * h + l)));
                    for (int q = 0; q < 4; q++) p->q[4 * h + q][l] = u[q];
                }
            }
            for (int s = 0; s < 8; s++) {
                const kl_iv pr = kl_iv_cvt_i8p((const int8_t *)(r + KQG_C16_SC(fmt) + 32 * s));
                const kl_iv lo = kl_iv_lo16(pr), hi = kl_iv_srl32(pr, 16);
                kl_iv_store(p->off[s], kl_iv_mul16(pr, -32));
                kl_iv_store(p->sc[2 * s], kl_iv_or(lo, kl_iv_sll32(lo, 16)));
                kl_iv_store(p->sc[2 * s + 1], kl_iv_or(hi, kl_iv_sll32(hi, 16)));
            }
            kl_fv_store(p->d, kl_fv_load_f16((const uint16_t *)(r + KQG_C16_D(fmt))));
            continue;
        }
        for (int t = 0; t < 8; t++) {
            const kl_iv hb = kl_iv_loadu(r + KQG_C16_HM + 64 * t);
            for (int h = 0; h < 2; h++) {
                const kl_iv v = kl_iv_loadu(r + 64 * (8 * h + t));
                for (int k = 0; k < 4; k++) p->q[4 * h + k][t] = kl_iv_code3(v, 2 * k, hb, 4 * h + k);
            }
        }
        for (int j = 0; j < 16; j++) {
            const kl_iv w = kl_iv_cvt_i8w((const int8_t *)(r + KQG_C16_SC(fmt) + 16 * j));
            const kl_iv pair = kl_iv_or(w, kl_iv_sll32(w, 16));
            kl_iv_store(p->sc[j], pair);
            kl_iv_store(p->nsc[j], kl_iv_neg16(pair));
        }
        kl_fv_store(p->d, kl_fv_load_f16((const uint16_t *)(r + KQG_C16_D(fmt))));
    }
}
#endif

/* MT rows against the panel: fa[NACC r + l] is acc[l] of row r (KQG_L floats); q5_K: fa[9r + 8] is summ. */
KL_INLINE void kqg6_tile(float (*fa)[KQG_L], const kqg6_blk *P, int bc, const km_block_q8_k *x, int64_t nb,
                         int64_t b0, const int fmt, const int MT) {
    const int na = fmt == KL_KQ_Q5_K ? 9 : 8;
    for (int bb = 0; bb < bc; bb++) {
        const kqg6_blk *p = &P[bb];
        const km_block_q8_k *xb[KQG_MT];
        kl_fv t[KQG_MT];
        const kl_fv wd = kl_fv_load(p->d);
        for (int r = 0; r < MT; r++) {
            xb[r] = &x[r * nb + b0 + bb];
            t[r] = kl_fv_mul(wd, kl_fv_set1(xb[r]->d));
        }
        for (int l = 0; l < 8; l++) {
            kl_iv a[KQG_MT];
            for (int r = 0; r < MT; r++) a[r] = kl_iv_zero();
            for (int c = 0; c < 8; c++) {
                const kl_iv wq = p->q[c][l];
                const int j = fmt == KL_KQ_Q5_K ? c : 2 * c + l / 4;
                const kl_iv sc = kl_iv_load(p->sc[j]);
                for (int r = 0; r < MT; r++) a[r] = kl_iv_dp4s(a[r], wq, xb[r]->qs + 32 * c + 4 * l, sc);
                if (fmt == KL_KQ_Q3_K) { /* minus sc * 4 * (the four activations): the codes' offset */
                    const kl_iv nsc = kl_iv_load(p->nsc[j]), four = kl_iv_load(kqg_fours);
                    for (int r = 0; r < MT; r++) a[r] = kl_iv_dp4s(a[r], four, xb[r]->qs + 32 * c + 4 * l, nsc);
                }
            }
            if (fmt == KL_KQ_Q6_K) {
                const kl_iv off = kl_iv_load(p->off[l]);
                for (int r = 0; r < MT; r++) a[r] = kl_iv_dp2w(a[r], off, xb[r]->bsums + 2 * l);
            }
            for (int r = 0; r < MT; r++)
                kl_fv_store(fa[na * r + l], kl_fv_fma(t[r], kl_fv_cvt_iv(a[r]), kl_fv_load(fa[na * r + l])));
        }
        if (fmt == KL_KQ_Q5_K) {
            const kl_fv wm = kl_fv_load(p->dm);
            for (int r = 0; r < MT; r++) {
                int16_t ps[8];
                for (int j = 0; j < 8; j++) ps[j] = (int16_t)(xb[r]->bsums[2 * j] + xb[r]->bsums[2 * j + 1]);
                kl_iv im = kl_iv_zero();
                for (int q = 0; q < 4; q++) im = kl_iv_dp2w(im, kl_iv_load(p->off[q]), ps + 2 * q);
                const kl_fv tm = kl_fv_neg(kl_fv_mul(kl_fv_set1(xb[r]->d), wm));
                kl_fv_store(fa[9 * r + 8], kl_fv_fma(kl_fv_cvt_iv(im), tm, kl_fv_load(fa[9 * r + 8])));
            }
        }
    }
}

/* ---- the driver ---- */

/* Float accumulators per row: q4_K / q2_K acc and accm; q6_K / q3_K acc[0..7]; q5_K acc[0..7] and summ. */
#define KQG_VECDOT(fmt) ((fmt) == KL_KQ_Q6_K || (fmt) == KL_KQ_Q5_K || (fmt) == KL_KQ_Q3_K)
#define KQG_NACC(fmt) ((fmt) == KL_KQ_Q5_K ? 9 : KQG_VECDOT(fmt) ? 8 : 2)

/* Columns [n0, n1) of y (row stride N) for all M rows, fmt KL_KQ_Q4_K / KL_KQ_Q2_K (N % 8 == 0 callers only:
 * the repack contract) or KL_KQ_Q6_K / KL_KQ_Q5_K (every N). Super-tiles of KQG_FA / KQG_NACC(fmt) rows.
 * c16: w is in the format's layout q4_k_c16 / q2_k_c16 / q3_k_c16 / q6_k_c16 (n0 a multiple of 16; 16-lane headers
 * with KL_IV_LOADU), else the GGUF's. */
KL_INLINE void kqg_drive(float *y, const uint8_t *w, const km_block_q8_k *x, int64_t M, int64_t N, int64_t nb,
                         int64_t n0, int64_t n1, const int fmt, const int c16) {
    (void)c16; /* read only where the lanes header can load the layout */
    const int nacc = KQG_NACC(fmt);
    const int64_t mst = KQG_FA / nacc;
    const int64_t wrow = nb * KL_KQ_WBLK(fmt);
    union {
        kqg_blk q4[KQG_KB];
        kqg6_blk q6[KQG_KB];
    } P;
    float fa[KQG_FA][KQG_L] __attribute__((aligned(64)));
    for (int64_t m0 = 0; m0 < M; m0 += mst) {
        const int64_t ms = M - m0 < mst ? M - m0 : mst;
        const km_block_q8_k *xs = x + m0 * nb;
        for (int64_t n = n0; n < n1; n += KQG_L) {
            const int nc = n1 - n < KQG_L ? (int)(n1 - n) : KQG_L;
            memset(fa, 0, sizeof(float) * KQG_L * (size_t)nacc * (size_t)ms);
            for (int64_t b0 = 0; b0 < nb; b0 += KQG_KB) {
                const int bc = nb - b0 < KQG_KB ? (int)(nb - b0) : KQG_KB;
                int64_t m = 0;
                if (KQG_VECDOT(fmt)) {
#if defined(KL_IV_LOADU) && KL_FV_LANES == 16
                    if (c16 && (fmt == KL_KQ_Q3_K || fmt == KL_KQ_Q6_K))
                        kqg6_pack_c16(P.q6, w + n / 16 * nb * KQG_C16_REC(fmt), b0, bc, fmt);
                    else
#endif
                        kqg6_pack(P.q6, w + n * wrow, wrow, b0, bc, nc, fmt);
                    for (; m + KQG_MT <= ms; m += KQG_MT) kqg6_tile(fa + nacc * m, P.q6, bc, xs + m * nb, nb, b0, fmt, KQG_MT);
                    for (; m < ms; m++) kqg6_tile(fa + nacc * m, P.q6, bc, xs + m * nb, nb, b0, fmt, 1);
                } else {
#if defined(KL_IV_LOADU) && KL_FV_LANES == 16
                    if (c16)
                        kqg_pack_c16(P.q4, w + n / 16 * nb * KQG_C16_REC(fmt), b0, bc, fmt);
                    else
#endif
                        kqg_pack(P.q4, w + n * wrow, wrow, b0, bc, nc, fmt);
                    for (; m + KQG_MT <= ms; m += KQG_MT) kqg_tile(fa + 2 * m, P.q4, bc, xs + m * nb, nb, b0, fmt, KQG_MT);
                    for (; m < ms; m++) kqg_tile(fa + 2 * m, P.q4, bc, xs + m * nb, nb, b0, fmt, 1);
                }
            }
            for (int64_t m = 0; m < ms; m++) {
                float(*f)[KQG_L] = fa + nacc * m;
                kl_fv v;
                if (KQG_VECDOT(fmt)) { /* km_kq_reduce8's tree, lane-wise (q5_K: + summ) */
                    const kl_fv s04 = kl_fv_add(kl_fv_load(f[0]), kl_fv_load(f[4]));
                    const kl_fv s26 = kl_fv_add(kl_fv_load(f[2]), kl_fv_load(f[6]));
                    const kl_fv s15 = kl_fv_add(kl_fv_load(f[1]), kl_fv_load(f[5]));
                    const kl_fv s37 = kl_fv_add(kl_fv_load(f[3]), kl_fv_load(f[7]));
                    v = kl_fv_add(kl_fv_add(s04, s26), kl_fv_add(s15, s37));
                    if (fmt == KL_KQ_Q5_K) v = kl_fv_add(v, kl_fv_load(f[8]));
                } else {
                    v = kl_fv_sub(kl_fv_load(f[0]), kl_fv_load(f[1]));
                }
                kl_fv_storen(y + (m0 + m) * N + n, v, nc);
            }
        }
    }
}

#endif /* KM_Q_K_GEMM_BODY_H */
