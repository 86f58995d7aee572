/* linear/q_k_gemm_body.h — the prefill schedule of linear.q4_k.q8_k.ggml.v1 (N % 8 == 0) and of
 * linear.q6_k.q8_k.ggml.v1 (every N, below): a register-blocked GEMM over column lanes, written once against the lanes interface (common/km_lanes.h, the w6-gemm names).
 * linear/q_k_repack_ggml_body.h calls it for M >= KQG_MIN_M when the instantiating file sets the schedule
 * below; decode (M = 1) and short batches keep that body's loops.
 *
 * Numerics: exactly the contract of q_k_repack_ggml_body.h (and linear/q4_k_q8_k_ggml_ref.c): per output
 * (m, n), for the superblocks b in increasing order,
 *     acc  = fma((float)isum, f32(fp16(w.d) * x.d), acc);  accm = fma((float)imin, f32(fp16(w.dmin) * x.d), accm)
 * from +0, y = acc - accm, with isum and imin exact int32. Only the way the exact integers are formed
 * differs: here vector lane c is output column c (KL_FV_LANES columns per group), so no operation crosses
 * columns and the float steps of every (m, n) are the ref's, whatever the group width, M or (ith, nth).
 * isum = sum over the 8 sub-blocks s of sc(s) * dot(s), dot(s) the exact sum of 32 code * activation
 * products (|dot| <= 32 * 15 * 128 < 2^16, |isum| < 2^25).
 *
 * Schedule: the thread's columns in groups of KL_FV_LANES; per group and chunk of up to KQG_KB superblocks
 * the weights are unpacked once into a panel (codes as [sub-block][4-value group][column], the scales, the
 * min pairs and the f32 d/dmin per column), then every activation row reads it: tiles of KQG_MT rows
 * whose partial dots stay in registers (one kl_iv_dp4 per row per panel vector), the float accumulators
 * of a super-tile of rows in a buffer between chunks (the panel is re-made per super-tile).
 *   KQG_MT     largest row tile (the tail of M goes in single rows)
 *   KQG_KB     superblocks per panel chunk
 *   KQG_FA     float accumulator rows of the buffer: a super-tile has KQG_FA / 2 rows (q4_K) or KQG_FA / 8 (q6_K)
 *   KQG_MIN_M  smallest M this schedule takes
 */
#ifndef KM_Q_K_GEMM_BODY_H
#define KM_Q_K_GEMM_BODY_H

#include "km_kquant.h"
#include "km_lanes.h"

#define KQG_L KL_FV_LANES

/* ---- q4_K ---- */

/* One superblock of a column group, unpacked. */
typedef struct {
    kl_iv q[8][8];                 /* sub-block s, 4-value group t: lane c = codes 4t..4t+3 of column c */
    int32_t sc[8][KQG_L];          /* sub-block scales */
    int16_t mn[4][2 * KQG_L];      /* lane c of pair p: (min 2p, min 2p + 1) */
    float d[KQG_L], dm[KQG_L];     /* f32 of the column's f16 d and dmin */
} __attribute__((aligned(64))) kqg_blk;

/* Unpack superblocks [b0, b0 + bc) of the nc (<= KQG_L) columns starting at w (row stride wrow). */
KL_INLINE void kqg_pack(kqg_blk *P, const uint8_t *w, int64_t wrow, int64_t b0, int bc, int nc) {
    for (int bb = 0; bb < bc; bb++) {
        kqg_blk *p = &P[bb];
        const uint8_t *blk = w + (b0 + bb) * KL_KQ_WBLK(KL_KQ_Q4_K);
        for (int ch = 0; ch < 4; ch++) { /* chunk ch: low nibbles = sub-block 2ch, high = 2ch + 1 */
            for (int t = 0; t < 8; t++) {
                const kl_iv g = kl_iv_gather32(blk + 16 + 32 * ch + 4 * t, wrow, nc);
                p->q[2 * ch][t] = kl_iv_nib_lo(g);
                p->q[2 * ch + 1][t] = kl_iv_nib_hi(g);
            }
        }
        for (int c = 0; c < KQG_L; c++) {
            uint64_t sc = 0, mn = 0;
            uint16_t hd = 0, hm = 0;
            if (c < nc) {
                const uint8_t *cb = blk + c * wrow;
                km_q4k_scales64(cb + 4, &sc, &mn);
                memcpy(&hd, cb, 2);
                memcpy(&hm, cb + 2, 2);
            }
            for (int s = 0; s < 8; s++) p->sc[s][c] = (int32_t)((sc >> (8 * s)) & 0xFF);
            for (int q = 0; q < 4; q++) {
                p->mn[q][2 * c] = (int16_t)((mn >> (16 * q)) & 0xFF);
                p->mn[q][2 * c + 1] = (int16_t)((mn >> (16 * q + 8)) & 0xFF);
            }
            p->d[c] = km_fp16_to_fp32(hd);
            p->dm[c] = km_fp16_to_fp32(hm);
        }
    }
}

/* MT activation rows x (row stride nb blocks) against the panel's bc superblocks (first b0): the float
 * accumulators fa[2r] (acc) and fa[2r + 1] (accm) of row r, KQG_L floats each, updated in place. */
KL_INLINE void kqg_tile(float (*fa)[KQG_L], const kqg_blk *P, int bc, const km_block_q8_k *x, int64_t nb,
                        int64_t b0, const int MT) {
    for (int bb = 0; bb < bc; bb++) {
        const kqg_blk *p = &P[bb];
        const km_block_q8_k *xb[KQG_MT];
        for (int r = 0; r < MT; r++) xb[r] = &x[r * nb + b0 + bb];
        kl_iv is[KQG_MT], im[KQG_MT];
        for (int r = 0; r < MT; r++) is[r] = kl_iv_zero();
        for (int s = 0; s < 8; s++) {
            kl_iv sd[KQG_MT];
            for (int r = 0; r < MT; r++) sd[r] = kl_iv_zero();
            for (int t = 0; t < 8; t++) {
                const kl_iv wq = p->q[s][t];
                for (int r = 0; r < MT; r++) sd[r] = kl_iv_dp4(sd[r], wq, xb[r]->qs + 32 * s + 4 * t);
            }
            const kl_iv sc = kl_iv_load(p->sc[s]);
            for (int r = 0; r < MT; r++) is[r] = kl_iv_add(is[r], kl_iv_mullo(sd[r], sc));
        }
        for (int r = 0; r < MT; r++) {
            int16_t ps[8]; /* the sub-blocks' activation sums, |.| <= 32 * 128 */
            for (int j = 0; j < 8; j++) ps[j] = (int16_t)(xb[r]->bsums[2 * j] + xb[r]->bsums[2 * j + 1]);
            im[r] = kl_iv_zero();
            for (int q = 0; q < 4; q++) im[r] = kl_iv_dp2w(im[r], kl_iv_load(p->mn[q]), ps + 2 * q);
        }
        const kl_fv wd = kl_fv_load(p->d), wm = kl_fv_load(p->dm);
        for (int r = 0; r < MT; r++) {
            const kl_fv xd = kl_fv_set1(xb[r]->d);
            kl_fv_store(fa[2 * r], kl_fv_fma(kl_fv_cvt_iv(is[r]), kl_fv_mul(wd, xd), kl_fv_load(fa[2 * r])));
            kl_fv_store(fa[2 * r + 1], kl_fv_fma(kl_fv_cvt_iv(im[r]), kl_fv_mul(wm, xd), kl_fv_load(fa[2 * r + 1])));
        }
    }
}

/* ---- q6_K (contract linear.q6_k.q8_k.ggml.v1, llama.cpp's vec_dot order; every N) ----
 * Per output (m, n) eight f32 lanes acc[l] from +0; per superblock b in order, with codes u(e) (0..63),
 * int8 scales sc(j) (j = e / 16) and t = f32(fp16(w.d) * x.d):
 *     lane(l) = sum_{c<8} sc(2c + l / 4) * sum_{i<4} u(32c + 4l + i) * x(32c + 4l + i)
 *               - 32 * (sc(2l) * bsums(2l) + sc(2l + 1) * bsums(2l + 1))             (exact int32)
 *     acc[l] = fma(t, (float)lane(l), acc[l])
 * y = ((acc0 + acc4) + (acc2 + acc6)) + ((acc1 + acc5) + (acc3 + acc7)) (km_kq_reduce8). Here the eight
 * acc[l] of the KL_FV_LANES columns of a group are eight column-lane vectors, so every float step is the
 * ref's. One kl_iv_dp4s (pair sums <= 2 * 63 * 128, then times the scale) per row per panel vector. */

typedef struct {
    kl_iv q[8][8];             /* [c][l]: lane = codes 32c + 4l .. + 3 of the column */
    int16_t sc[16][2 * KQG_L]; /* sub-block j: lane = (sc(j), sc(j)) */
    int16_t off[8][2 * KQG_L]; /* lane = (-32 sc(2l), -32 sc(2l + 1)) */
    float d[KQG_L];
} __attribute__((aligned(64))) kqg6_blk;

KL_INLINE void kqg6_pack(kqg6_blk *P, const uint8_t *w, int64_t wrow, int64_t b0, int bc, int nc) {
    for (int bb = 0; bb < bc; bb++) {
        kqg6_blk *p = &P[bb];
        const uint8_t *blk = w + (b0 + bb) * KL_KQ_WBLK(KL_KQ_Q6_K);
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
        for (int c = 0; c < KQG_L; c++) {
            int8_t sc[16];
            uint16_t hd = 0;
            memset(sc, 0, sizeof sc);
            if (c < nc) {
                memcpy(sc, blk + c * wrow + 192, 16);
                memcpy(&hd, blk + c * wrow + 208, 2);
            }
            for (int j = 0; j < 16; j++) p->sc[j][2 * c] = p->sc[j][2 * c + 1] = sc[j];
            for (int l = 0; l < 8; l++) {
                p->off[l][2 * c] = (int16_t)(-32 * sc[2 * l]);
                p->off[l][2 * c + 1] = (int16_t)(-32 * sc[2 * l + 1]);
            }
            p->d[c] = km_fp16_to_fp32(hd);
        }
    }
}

/* MT rows against the panel: fa[8r + l] is acc[l] of row r (KQG_L floats). */
KL_INLINE void kqg6_tile(float (*fa)[KQG_L], const kqg6_blk *P, int bc, const km_block_q8_k *x, int64_t nb,
                         int64_t b0, const int MT) {
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
                const kl_iv sc = kl_iv_load(p->sc[2 * c + l / 4]);
                for (int r = 0; r < MT; r++) a[r] = kl_iv_dp4s(a[r], wq, xb[r]->qs + 32 * c + 4 * l, sc);
            }
            const kl_iv off = kl_iv_load(p->off[l]);
            for (int r = 0; r < MT; r++) {
                const kl_iv v = kl_iv_dp2w(a[r], off, xb[r]->bsums + 2 * l);
                kl_fv_store(fa[8 * r + l], kl_fv_fma(t[r], kl_fv_cvt_iv(v), kl_fv_load(fa[8 * r + l])));
            }
        }
    }
}

/* ---- the driver ---- */

/* Float accumulators per row: q4_K acc and accm; q6_K acc[0..7]. */
#define KQG_NACC(fmt) ((fmt) == KL_KQ_Q6_K ? 8 : 2)

/* Columns [n0, n1) of y (row stride N) for all M rows, fmt KL_KQ_Q4_K (N % 8 == 0 callers only: the
 * repack contract) or KL_KQ_Q6_K (every N). Super-tiles of KQG_FA / KQG_NACC(fmt) rows. */
KL_INLINE void kqg_drive(float *y, const uint8_t *w, const km_block_q8_k *x, int64_t M, int64_t N, int64_t nb,
                         int64_t n0, int64_t n1, const int fmt) {
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
                if (fmt == KL_KQ_Q6_K) {
                    kqg6_pack(P.q6, w + n * wrow, wrow, b0, bc, nc);
                    for (; m + KQG_MT <= ms; m += KQG_MT) kqg6_tile(fa + 8 * m, P.q6, bc, xs + m * nb, nb, b0, KQG_MT);
                    for (; m < ms; m++) kqg6_tile(fa + 8 * m, P.q6, bc, xs + m * nb, nb, b0, 1);
                } else {
                    kqg_pack(P.q4, w + n * wrow, wrow, b0, bc, nc);
                    for (; m + KQG_MT <= ms; m += KQG_MT) kqg_tile(fa + 2 * m, P.q4, bc, xs + m * nb, nb, b0, KQG_MT);
                    for (; m < ms; m++) kqg_tile(fa + 2 * m, P.q4, bc, xs + m * nb, nb, b0, 1);
                }
            }
            for (int64_t m = 0; m < ms; m++) {
                float(*f)[KQG_L] = fa + nacc * m;
                kl_fv v;
                if (fmt == KL_KQ_Q6_K) { /* km_kq_reduce8's tree, lane-wise */
                    const kl_fv s04 = kl_fv_add(kl_fv_load(f[0]), kl_fv_load(f[4]));
                    const kl_fv s26 = kl_fv_add(kl_fv_load(f[2]), kl_fv_load(f[6]));
                    const kl_fv s15 = kl_fv_add(kl_fv_load(f[1]), kl_fv_load(f[5]));
                    const kl_fv s37 = kl_fv_add(kl_fv_load(f[3]), kl_fv_load(f[7]));
                    v = kl_fv_add(kl_fv_add(s04, s26), kl_fv_add(s15, s37));
                } else {
                    v = kl_fv_sub(kl_fv_load(f[0]), kl_fv_load(f[1]));
                }
                kl_fv_storen(y + (m0 + m) * N + n, v, nc);
            }
        }
    }
}

#endif /* KM_Q_K_GEMM_BODY_H */
