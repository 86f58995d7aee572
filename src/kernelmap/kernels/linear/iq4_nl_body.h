/* linear/iq4_nl_body.h — the family body of linear.iq4_nl.q8_0.ggml.v1, written once against the lanes interface
 * (common/km_lanes.h): 16-lane integer vectors with a VNNI dot (kl_iv_dp4 exact for every unsigned byte) and the
 * byte table lookup kl_iv_lut16; instantiated on km_lanes_avx512.h with VNNI (linear/iq4_nl_q8_0_ggml_avx512vnni.c).
 *
 * Numerics (exactly linear/iq4_nl_ref.h): N % 8 == 0 is llama.cpp's repacked order, per output (m, n) one f32
 * chain acc = +0; per block b in order isum = the exact int32 sum of the 32 products value * quant, t =
 * f32(fp16(w.d)) * f32(fp16(x.d)), acc = fma((float)isum, t, acc); y = acc. Vector lane c is output column c, so no
 * float operation crosses columns and the chain of each (m, n) is the ref's whatever M, the tiling or (ith, nth).
 * The integer: a weight value v (-127..113, the table at its nibble) is stored in the panel as the byte v + 128
 * (1..241), and kl_iv_dp4 of 8 such vectors against the activation's quants, seeded with -128 * (the block's 32
 * quants summed), is the exact isum (|isum| <= 32 * 127 * 127 < 2^24, so (float) is exact too).
 * N % 8 != 0 is llama.cpp's vec_dot order, whose lanes and two accumulators this column-lane schedule does not
 * have: those calls run the ref's loop (linear/iq4_nl_ref.h) on the thread's columns (no model here has such N).
 *
 * Schedule: the thread's columns in groups of 16; per group and chunk of up to KIQ_KB blocks the weights are
 * unpacked once into a panel (per block the 8 value vectors and the 16 d), then every activation row of the
 * super-tile reads it, KIQ_MT rows at a time sharing each value vector; the rows' f32 chains stay in a buffer
 * between chunks. Seeds are made once per call and super-tile (KIQ_SEEDS ints: rows x blocks; a K of more blocks
 * makes each row's seeds per panel).
 *   KIQ_MT     activation rows per register tile (the tail of M in single rows)
 *   KIQ_KB     blocks per panel chunk
 *   KIQ_PF     decode (M < KIQ_MT): bytes of the next group prefetched (to L2) per block of this one
 * Partition: groups of 16 output columns (km_part over ceil(N / 16)) in the repacked order, columns (km_part
 * over N) in the vec_dot order; no output depends on M or (ith, nth).
 */
#ifndef KM_IQ4_NL_BODY_H
#define KM_IQ4_NL_BODY_H

#include "km_lanes.h"
#include "iq4_nl_ref.h"

#if KL_FV_LANES != 16 || !defined(KL_IV)
#error "linear/iq4_nl_body.h needs 16-lane integer vectors"
#endif

#define KIQ_L 16
#define KIQ_BLK 18                        /* iq4_nl block bytes: f16 d, 16 nibble bytes */
#define KIQ_XBLK 34                       /* q8_0 activation block bytes */
#define KIQ_SEEDS 8192                    /* seed ints per super-tile (rows x blocks) */
#define KIQ_FA 512                        /* f32 chains of the buffer: rows per super-tile at most */

/* The value table as the bytes v + 128, for kl_iv_lut16. */
static const uint8_t kiq_table[16] = {1, 24, 45, 63, 79, 93, 106, 118, 129, 141, 153, 166, 181, 197, 217, 241};

/* One block of a column group: q[l] lane c = column c's values 4l..4l+3 as bytes v + 128; d = f32 of each d. */
typedef struct {
    kl_iv q[8];
    float d[KIQ_L];
} __attribute__((aligned(64))) kiq_blk;

/* Unpack blocks [b0, b0 + bc) of the nc (<= 16) rows at w (row stride wrow); rows past nc read as zero bytes. */
KL_INLINE void kiq_pack(kiq_blk *P, const uint8_t *w, int64_t wrow, int64_t b0, int bc, int nc) {
    for (int bb = 0; bb < bc; bb++) {
        const uint8_t *blk = w + (b0 + bb) * KIQ_BLK;
        for (int t = 0; t < 4; t++) { /* qs dword t: values 4t..4t+3 (low nibbles), 16+4t.. (high) */
            const kl_iv g = kl_iv_gather32(blk + 2 + 4 * t, wrow, nc);
            P[bb].q[t] = kl_iv_lut16(kl_iv_nib_lo(g), kiq_table);
            P[bb].q[4 + t] = kl_iv_lut16(kl_iv_nib_hi(g), kiq_table);
        }
        kl_fv_store(P[bb].d, kl_fv_f16s(blk, wrow, nc));
    }
}

/* MT rows (their activation blocks at x, row stride xrow) against the panel's bc blocks (the first b0), row r's
 * seed of panel block bb at sd[r * ss + bb]: fa[r] (16 floats) is row r's chain, updated in place. */
KL_INLINE void kiq_tile(float (*fa)[KIQ_L], const kiq_blk *P, int bc, const uint8_t *x, int64_t xrow,
                        const int32_t *sd, int64_t ss, int64_t b0, const int MT) {
    kl_fv acc[8];
    for (int r = 0; r < MT; r++) acc[r] = kl_fv_load(fa[r]);
    for (int bb = 0; bb < bc; bb++) {
        const kiq_blk *p = &P[bb];
        const uint8_t *xb = x + (b0 + bb) * KIQ_XBLK;
        kl_iv is[8];
        for (int r = 0; r < MT; r++) is[r] = kl_iv_set1(sd[r * ss + bb]);
        for (int l = 0; l < 8; l++) {
            const kl_iv q = p->q[l];
            for (int r = 0; r < MT; r++) is[r] = kl_iv_dp4(is[r], q, (const int8_t *)(xb + r * xrow + 2 + 4 * l));
        }
        const kl_fv d = kl_fv_load(p->d);
        for (int r = 0; r < MT; r++)
            acc[r] = kl_fv_fma(kl_fv_cvt_iv(is[r]), kl_fv_mul(d, kl_fv_set1(kl_f32_f16(xb + r * xrow))), acc[r]);
    }
    for (int r = 0; r < MT; r++) kl_fv_store(fa[r], acc[r]);
}

#ifndef KIQ_MT
#define KIQ_MT 4
#endif
#if KIQ_MT > 8
#error "linear/iq4_nl_body.h: KIQ_MT is at most 8"
#endif

/* The whole linear.token_major.v1 call (w [N, K] iq4_nl in ggml_blocks, x [M, K] q8_0, y [M, N] f32). */
static inline void kiq_linear(float *y, const void *w, const void *x, int64_t M, int64_t N, int64_t K, int ith,
                              int nth) {
    int64_t lo, hi;
    if (N % 8 != 0) { /* llama.cpp's vec_dot order: the ref's loop */
        km_part(N, ith, nth, &lo, &hi);
        km_iq4nl_ref_cols(y, w, x, M, N, K, lo, hi);
        return;
    }
    const int64_t nb = K / 32, wrow = nb * KIQ_BLK, xrow = nb * KIQ_XBLK, ng = (N + KIQ_L - 1) / KIQ_L;
    km_part(ng, ith, nth, &lo, &hi);
    if (lo >= hi) return;
    const uint8_t *wb = (const uint8_t *)w, *xb = (const uint8_t *)x;
    kiq_blk P[KIQ_KB];
    int32_t sd[KIQ_SEEDS];
    float fa[KIQ_FA][KIQ_L] __attribute__((aligned(64)));
    const int seeded = nb <= KIQ_SEEDS; /* else (K over KIQ_SEEDS blocks) each row's seeds per panel, as needed */
    int64_t ms_max = seeded ? KIQ_SEEDS / nb : 1;
    if (ms_max > KIQ_FA) ms_max = KIQ_FA;
    for (int64_t m0 = 0; m0 < M; m0 += ms_max) {
        const int64_t ms = M - m0 < ms_max ? M - m0 : ms_max;
        const uint8_t *xs = xb + m0 * xrow;
        if (seeded)
            for (int64_t r = 0; r < ms; r++)
                for (int64_t b = 0; b < nb; b++)
                    sd[r * nb + b] = -128 * kl_q32_xsum((const int8_t *)(xs + r * xrow + b * KIQ_XBLK + 2));
        for (int64_t g = lo; g < hi; g++) {
            const int nc = N - g * KIQ_L < KIQ_L ? (int)(N - g * KIQ_L) : KIQ_L;
            const uint8_t *wg = wb + g * KIQ_L * wrow;
            for (int64_t r = 0; r < ms; r++) kl_fv_store(fa[r], kl_fv_zero());
            for (int64_t b0 = 0; b0 < nb; b0 += KIQ_KB) {
                const int bc = nb - b0 < KIQ_KB ? (int)(nb - b0) : KIQ_KB;
                kiq_pack(P, wg, wrow, b0, bc, nc);
                if (ms < KIQ_MT && g + 1 < hi) { /* memory hint: decode streams the next group's rows meanwhile */
                    const int64_t tot = KIQ_L * wrow;
                    for (int64_t o = b0 * tot / nb / 64 * 64; o < (b0 + bc) * tot / nb; o += 64)
                        kl_prefetch_l2(wg + tot + o);
                }
                if (!seeded) {
                    int32_t one[KIQ_KB];
                    for (int64_t r = 0; r < ms; r++) {
                        for (int bb = 0; bb < bc; bb++)
                            one[bb] = -128 * kl_q32_xsum((const int8_t *)(xs + r * xrow + (b0 + bb) * KIQ_XBLK + 2));
                        kiq_tile(fa + r, P, bc, xs + r * xrow, xrow, one, 0, b0, 1);
                    }
                    continue;
                }
                int64_t r = 0;
                for (; r + KIQ_MT <= ms; r += KIQ_MT)
                    kiq_tile(fa + r, P, bc, xs + r * xrow, xrow, sd + r * nb + b0, nb, b0, KIQ_MT);
                for (; r < ms; r++) kiq_tile(fa + r, P, bc, xs + r * xrow, xrow, sd + r * nb + b0, nb, b0, 1);
            }
            for (int64_t r = 0; r < ms; r++) kl_fv_storen(y + (m0 + r) * N + g * KIQ_L, kl_fv_load(fa[r]), nc);
        }
    }
}

#endif /* KM_IQ4_NL_BODY_H */
