/* linear/iq4_nl_body.h — the family body of linear.iq4_nl.q8_0.ggml.v1, written once against the lanes interface
 * (common/km_lanes.h): 16-lane integer vectors with a VNNI dot (kl_iv_dp4 exact for every unsigned byte) and the
 * byte table lookup kl_iv_lut16; instantiated on km_lanes_avx512.h with VNNI for the GGUF layout
 * (linear/iq4_nl_q8_0_ggml_avx512vnni.c: 4 dword gathers per block and 16 columns) and for the repacked layout
 * "iq4_nl_c16" (linear/iq4_nl_q8_0_ggml_c16_avx512vnni.c: 4 loads (the ABI promises weights 4-byte alignment); weights/repack.py states the layout),
 * the source a compile-time argument of kiq_linear.
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
 * super-tile reads it, KIQ_MT rows at a time sharing each value vector (decode on "iq4_nl_c16", fewer than
 * KIQ_MT rows: each row dots the layout's loads directly, kiq_row16); the rows' f32 chains stay in a buffer
 * between chunks. Seeds are made once per call and super-tile (KIQ_SEEDS ints: rows x blocks; a K of more blocks
 * makes each row's seeds per panel).
 *   KIQ_MT     activation rows per register tile (the tail of M in single rows)
 *   KIQ_KB     blocks per panel chunk
 *   KIQ_PF     decode (M < KIQ_MT), "iq4_nl_c16": software prefetch distance in bytes (to L2) along the thread's
 *              groups, one contiguous range (the GGUF layout prefetches the next group's 16 rows instead)
 * Partition: groups of 16 output columns (km_part over ceil(N / 16)) in the repacked order and, c16, in the vec_dot
 * order; columns (km_part over N) in the GGUF layout's vec_dot order; no output depends on M or (ith, nth).
 */
#ifndef KM_IQ4_NL_BODY_H
#define KM_IQ4_NL_BODY_H

#include "km_lanes.h"
#include "iq4_nl_ref.h"

#if KL_FV_LANES != 16 || !defined(KL_IV) || !defined(KL_IV_LOADU)
#error "linear/iq4_nl_body.h needs 16-lane integer vectors with unaligned loads"
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

/* Unpack blocks [b0, b0 + bc) of the nc (<= 16) rows of a group at w: the GGUF layout (row stride wrow; rows past nc
 * read as zero bytes) or, c16, the group's "iq4_nl_c16" bytes (scale area s; pad rows are zero bytes). */
KL_INLINE void kiq_pack(kiq_blk *P, const uint8_t *w, int64_t wrow, int64_t s, int64_t b0, int bc, int nc,
                        const int c16) {
    for (int bb = 0; bb < bc; bb++) {
        const int64_t b = b0 + bb;
        const uint8_t *blk = w + b * KIQ_BLK;
        for (int t = 0; t < 4; t++) { /* qs dword t: values 4t..4t+3 (low nibbles), 16+4t.. (high) */
            const kl_iv g = c16 ? kl_iv_loadu(w + s + 256 * b + 64 * t) : kl_iv_gather32(blk + 2 + 4 * t, wrow, nc);
            P[bb].q[t] = kl_iv_lut16(kl_iv_nib_lo(g), kiq_table);
            P[bb].q[4 + t] = kl_iv_lut16(kl_iv_nib_hi(g), kiq_table);
        }
        kl_fv_store(P[bb].d, c16 ? kl_fv_load_f16((const uint16_t *)(w + 32 * b)) : kl_fv_f16s(blk, wrow, nc));
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

#ifndef KIQ_PF
#define KIQ_PF 8192
#endif

/* Decode, "iq4_nl_c16": one activation row against one group (its bytes at g, nb blocks, scale area s), straight
 * from the layout's loads into the dots (no panel); pf: prefetch KIQ_PF bytes ahead, up to wend. The same steps
 * per lane as kiq_tile. */
KL_INLINE void kiq_row16(float *y, int nc, const uint8_t *g, int64_t nb, int64_t s, const uint8_t *x,
                         const int32_t *sd, const uint8_t *wend) {
    kl_fv acc = kl_fv_zero();
    const int64_t gbytes = s + 256 * nb;
    int64_t pfo = 0; /* bytes of the group prefetched so far */
    for (int64_t b = 0; b < nb; b++) {
        for (const int64_t e = (b + 1) * gbytes / nb; pfo < e; pfo += 64)
            if (g + KIQ_PF + pfo < wend) kl_prefetch_l2(g + KIQ_PF + pfo);
        const uint8_t *xb = x + b * KIQ_XBLK;
        kl_iv is = kl_iv_set1(sd[b]);
        for (int t = 0; t < 4; t++) {
            const kl_iv v = kl_iv_loadu(g + s + 256 * b + 64 * t);
            is = kl_iv_dp4(is, kl_iv_lut16(kl_iv_nib_lo(v), kiq_table), (const int8_t *)(xb + 2 + 4 * t));
            is = kl_iv_dp4(is, kl_iv_lut16(kl_iv_nib_hi(v), kiq_table), (const int8_t *)(xb + 18 + 4 * t));
        }
        const kl_fv d = kl_fv_load_f16((const uint16_t *)(g + 32 * b));
        acc = kl_fv_fma(kl_fv_cvt_iv(is), kl_fv_mul(d, kl_fv_set1(kl_f32_f16(xb))), acc);
    }
    kl_fv_storen(y, acc, nc);
}

#ifndef KIQ_MT
#define KIQ_MT 4
#endif

#if KIQ_MT > 8
#error "linear/iq4_nl_body.h: KIQ_MT is at most 8"
#endif

/* The whole linear.token_major.v1 call (w [N, K] iq4_nl in ggml_blocks or, c16, in "iq4_nl_c16"; x [M, K] q8_0;
 * y [M, N] f32). */
static inline void kiq_linear(float *y, const void *w, const void *x, int64_t M, int64_t N, int64_t K, int ith,
                              int nth, const int c16) {
    int64_t lo, hi;
    const int64_t nb = K / 32, ng = (N + KIQ_L - 1) / KIQ_L;
    if (N % 8 != 0) { /* llama.cpp's vec_dot order: the ref's loop */
        if (c16) {
            km_part(ng, ith, nth, &lo, &hi);
            km_iq4nl_ref_cols_at(y, w, km_iq4nl_c16_block, x, M, N, K, KIQ_L * lo, KIQ_L * hi < N ? KIQ_L * hi : N);
        } else {
            km_part(N, ith, nth, &lo, &hi);
            km_iq4nl_ref_cols(y, w, x, M, N, K, lo, hi);
        }
        return;
    }
    const int64_t wrow = nb * KIQ_BLK, xrow = nb * KIQ_XBLK;
    const int64_t s = (32 * nb + 63) / 64 * 64, gbytes = c16 ? s + 256 * nb : KIQ_L * wrow; /* a group's bytes */
    km_part(ng, ith, nth, &lo, &hi);
    if (lo >= hi) return;
    const uint8_t *wb = (const uint8_t *)w, *xb = (const uint8_t *)x;
    const uint8_t *wend = wb + hi * gbytes; /* the thread's range ends here (prefetch stops short of it) */
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
        if (c16 && ms < KIQ_MT && seeded) { /* decode: each row straight from the layout */
            for (int64_t g = lo; g < hi; g++) {
                const int nc = N - g * KIQ_L < KIQ_L ? (int)(N - g * KIQ_L) : KIQ_L;
                for (int64_t r = 0; r < ms; r++)
                    kiq_row16(y + (m0 + r) * N + g * KIQ_L, nc, wb + g * gbytes, nb, s, xs + r * xrow, sd + r * nb, wend);
            }
            continue;
        }
        for (int64_t g = lo; g < hi; g++) {
            const int nc = N - g * KIQ_L < KIQ_L ? (int)(N - g * KIQ_L) : KIQ_L;
            const uint8_t *wg = wb + g * gbytes;
            for (int64_t r = 0; r < ms; r++) kl_fv_store(fa[r], kl_fv_zero());
            for (int64_t b0 = 0; b0 < nb; b0 += KIQ_KB) {
                const int bc = nb - b0 < KIQ_KB ? (int)(nb - b0) : KIQ_KB;
                if (ms < KIQ_MT) { /* memory hint: decode streams the weights from DRAM */
                    const uint8_t *a = wg + b0 * gbytes / nb + KIQ_PF, *e = wg + (b0 + bc) * gbytes / nb + KIQ_PF;
                    if (!c16) a = wg + gbytes + b0 * gbytes / nb, e = wg + gbytes + (b0 + bc) * gbytes / nb;
                    for (const uint8_t *p = (const uint8_t *)((uintptr_t)a & ~(uintptr_t)63); p < e && p < wend; p += 64)
                        kl_prefetch_l2(p);
                }
                kiq_pack(P, wg, wrow, s, b0, bc, nc, c16);
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
