/* linear/q32_gemm_body.h — the prefill schedule of the 32-element ggml-order linears (linear.<w>.<a>.ggml.v1,
 * w = q4_0, q5_0, q8_0 against q8_0, w = q4_1, q5_1 against q8_1): a register-blocked GEMM over column lanes,
 * written once against the lanes interface (common/km_lanes.h, the w6-gemm and w6-q32gemm names).
 * linear/q32_ggml_body.h (and, for q4_0 with N % 8 == 0, linear/q32_cols_ggml_body.h) call it for
 * M >= KQ32G_MIN_M when the instantiating file sets the schedule below; decode and short batches keep
 * those bodies' loops.
 *
 * Numerics: exactly the contracts of those bodies (and linear/<w>_<a>_ggml_ref.c). Per output (m, n):
 *   - the vec_dot order (every format; q4_0 when N % 8 != 0): eight f32 lanes acc[l] from +0; for the
 *     blocks b in increasing order lane[l] = the exact int32 sum of the four products at 4l..4l+3,
 *     t = f32(fp16(w.d) * fp16(x.d)), acc[l] = fma(t, (float)lane[l], acc[l]); y = ((acc0 + acc4) +
 *     (acc2 + acc6)) + ((acc1 + acc5) + (acc3 + acc7)); q4_1 / q5_1 add the chain summs = fma(fp16(w.m),
 *     fp16(x.s), summs) (from +0, blocks in order) after the fold;
 *   - the repacked order (q4_0 when N % 8 == 0, one = 1): one chain acc = fma((float)isum, t, acc) with
 *     isum the exact int32 sum of the block's 32 products; y = acc.
 * Only the way the exact integers are formed differs from those bodies: vector lane c is output column c
 * (KL_FV_LANES columns per group), so no float operation crosses columns and every (m, n) sees its
 * contract's float steps whatever the group width, M or (ith, nth). The weight's integer is its stored
 * code minus the format's offset (q4_0 8, q5_0 16, q8_0 128 after flipping the int8's sign bit, q4_1 / q5_1
 * 0); the codes are unsigned bytes, so one kl_iv_dp4 per 4 values of 16 columns sums code * quant exactly,
 * on top of the seed KL_MAGIC_I - offset * (the 4 or 32 quants' sum); |lane| <= 4 * 128 * 128 and
 * |isum| <= 32 * 8 * 128 are far below 2^22, so kl_fv_unmagic gives (float)lane exactly. q8_0's bytes reach
 * 255, so q8_0 needs a kl_iv_dp4 exact for every unsigned byte (VNNI; the fallback's int16 pair sums are
 * exact only for codes <= 127): instantiate it on VNNI lanes only. q4_0, q4_1, q5_0 and q5_1 (codes <= 31) are
 * instantiated on every lanes header with KL_IV: avx512vnni, avx512, avx2 (8-column groups, one per panel:
 * 16 ymm hold one group's 8 accumulators), neon and dotprod. (A q8_0 GEMM on the other lanes with signed
 * dots, |w| * sign-adjusted x, was exact but measured no faster than q8_0's row tiles on avx2 and slower on
 * avx512, whose row tiles need no unpacking: not kept.)
 *
 * Schedule: the thread's columns in panels of KQ32G_NG groups of KL_FV_LANES columns; per panel and chunk of up to
 * KQ32G_KB blocks the weights are unpacked once (per block and contract lane l the 4 codes of each column, the f32
 * d (and m) per column), then every activation row reads it: the vec_dot order one row at a time, its 8 (+1) float
 * accumulators per group in registers for the chunk and its seeds, scale and quant broadcasts shared by the groups;
 * the repacked order in tiles of KQ32G_MT1 rows, one chain per (row, group) in registers. The seeds of a tile's
 * chunk are computed before its dot loop, which broadcasts them from memory; with one K chunk the vec_dot order's
 * seeds are made once per super-tile of up to KQ32G_SDR rows for all its panels (q5_0 +8-11% at K = 640 on Zen 5).
 * With more than one chunk (nb > KQ32G_KB) rows go in super-tiles of KQ32G_MS and the accumulators are parked
 * between chunks.
 *   KQ32G_NG     column groups per panel (1 or 2)
 *   KQ32G_MT1    row tile of the repacked order (1 accumulator per row)
 *   KQ32G_KB     blocks per panel chunk
 *   KQ32G_MS     rows per super-tile when K has several chunks
 *   KQ32G_MIN_M  smallest M this schedule takes
 *   KQ32G_LMT    optional (lanes with KL_IV_DP4U), 4..16: the offset formats' vec_dot order in lane-outer tiles of
 *                this many rows (kq32g_ltile; the other formats and orders keep the tiles above)
 *
 * Lanes headers with KL_TILE (km_lanes_avx512_amx.h: AMX-INT8) run the repacked order's rows in tiles of 16 on the
 * tile unit (kq32g_ttile): one tdpbssd per block gives the 16 x 16 whole-block sums that order takes, the float
 * steps stay kq32g_tile1's; the rows past the last 16 and an OS that refuses the tile state take kq32g_tile1.
 */
#ifndef KM_Q32_GEMM_BODY_H
#define KM_Q32_GEMM_BODY_H

#include "km_lanes.h"
#include "q32_r8_layout.h"

#ifndef KL_IV
#error "linear/q32_gemm_body.h needs the column-lane int32 operations (KL_IV) of the lanes header"
#endif

#define KQ32G_L KL_FV_LANES
#define KQ32G_LXS 64 /* kq32g_ltile, one chunk: rows per super-tile prepared at once (64 x KQ32G_KB x 36 bytes) */
#define KQ32G_PARK 9 /* parked vectors per row: 8 lanes and the min chain */
#define KQ32G_SDR 128 /* one K chunk: rows per super-tile (their seeds made once, kq32g_linear) */

/* One block of a column group, unpacked. */
typedef struct {
    kl_iv q[8];       /* contract lane l: lane c = column c's codes 4l..4l+3 as unsigned bytes */
    float d[KQ32G_L]; /* f32 of the column's f16 d (+0 past the group) */
    float m[KQ32G_L]; /* the min formats: f32 of the column's f16 m */
} __attribute__((aligned(64))) kq32g_blk;

/* The offset of a format's stored byte (q8_0: the int8 with its sign bit flipped). */
#define KQ32G_OFF(fmt) ((fmt) == KL_Q32_Q8_0 ? 128 : KL_Q32_OFF(fmt))

/* Unpack blocks [b0, b0 + bc) of the nc (<= KQ32G_L) columns starting at w (row stride wrow). */
KL_INLINE void kq32g_pack(kq32g_blk *P, const uint8_t *w, int64_t wrow, int64_t b0, int bc, int nc, const int fmt) {
    const int64_t wblk = KL_Q32_WBLK(fmt);
    for (int bb = 0; bb < bc; bb++) {
        kq32g_blk *p = &P[bb];
        const uint8_t *blk = w + (b0 + bb) * wblk;
        kl_iv g4[8]; /* the 16 or 32 code bytes of the nc rows, lane c = row c (rows past nc: see below) */
#if defined(KL_IV_ROWS4) /* loads and a transpose; lanes past nc repeat the last row (their outputs are not stored) */
        kl_iv_rows4(g4, blk + KL_Q32_QS(fmt), wrow, nc);
        if (fmt == KL_Q32_Q8_0) kl_iv_rows4(g4 + 4, blk + KL_Q32_QS(fmt) + 16, wrow, nc);
#else
        for (int l = 0; l < (fmt == KL_Q32_Q8_0 ? 8 : 4); l++) g4[l] = kl_iv_gather32(blk + KL_Q32_QS(fmt) + 4 * l, wrow, nc);
#endif
        if (fmt == KL_Q32_Q8_0) { /* int8 weight w as the byte w + 128 (offset 128) */
            for (int l = 0; l < 8; l++) p->q[l] = kl_iv_xor(g4[l], kl_iv_set1((int32_t)0x80808080u));
        } else { /* element i < 16: low nibble of qs[i], 16 + i: its high nibble; qh bit i: element i's bit 4 */
            kl_iv h = kl_iv_zero();
            if (KL_Q32_QH(fmt) >= 0) h = kl_iv_gather32(blk + KL_Q32_QH(fmt), wrow, nc);
            for (int t = 0; t < 4; t++) {
                const kl_iv g = g4[t];
                kl_iv lo = kl_iv_nib_lo(g), hi = kl_iv_nib_hi(g);
                if (KL_Q32_QH(fmt) >= 0) {
                    lo = kl_iv_add(lo, kl_iv_bitbytes(h, 4 * t, 16));
                    hi = kl_iv_add(hi, kl_iv_bitbytes(h, 16 + 4 * t, 16));
                }
                p->q[t] = lo;
                p->q[t + 4] = hi;
            }
        }
        kl_fv_store(p->d, kl_fv_f16s(blk, wrow, nc));
        if (KL_Q32_HASMIN(fmt)) kl_fv_store(p->m, kl_fv_f16s(blk + 2, wrow, nc));
    }
}

#if defined(KL_IV_R8)
/* The same unpacking from the repacked layout q32_r8 (linear/q32_r8_layout.h; not q8_0): blocks [b0, b0 + bc) (both
 * even: a tile is two blocks) of the group whose tiles start at g (lanes 0-7) and, on 16-lane headers, of the
 * group at g + gstride (lanes 8-15; gstride 0 when the panel has no second group: those lanes repeat the first
 * group and their outputs are not stored). A tile is eight 32-byte row loads and one dword transpose for both of
 * its blocks (low / high nibbles), the fifth bits one shift per lane, the scales one 16-byte load per group: no
 * gathers. Rows past N in a group's last rows are zero bytes (code 0, d = +0), as kq32g_pack's lanes past nc. */
KL_INLINE void kq32g_pack_r8(kq32g_blk *P, const uint8_t *g, int64_t gstride, int64_t b0, int bc, const int fmt) {
    for (int bb = 0; bb < bc; bb += 2) {
        const uint8_t *t = g + (b0 + bb) / 2 * KQR8_TILE(fmt);
        kl_iv raw[8];
        kl_iv_r8_nib(raw, t + KQR8_ON(fmt), gstride);
        for (int h = 0; h < 2; h++) {
            kq32g_blk *p = &P[bb + h];
            for (int l = 0; l < 8; l++) {
                kl_iv q = h ? kl_iv_nib_hi(raw[l]) : kl_iv_nib_lo(raw[l]);
                if (KQR8_QH(fmt)) q = kl_iv_or(q, kl_iv_r8_bit(t + KQR8_OH(fmt) + 32 * h, gstride, l));
                p->q[l] = q;
            }
            kl_fv_store(p->d, kl_fv_r8_f16(t + 16 * h, gstride));
            if (KL_Q32_HASMIN(fmt)) kl_fv_store(p->m, kl_fv_r8_f16(t + 32 + 16 * h, gstride));
        }
    }
}
#endif

/* The weight layouts a panel is loaded from (kq32g_linear's lay). */
#define KQ32G_GGUF 0 /* ggml_blocks: one row of blocks per column */
#define KQ32G_R8 1   /* q32_r8 (linear/q32_r8_layout.h) */
#define KQ32G_C16 2  /* q8_0_c16 (linear/q8_0_c16_body.h): groups of 16 columns */

/* Bytes of a q8_0_c16 group's scale area (32 per block, rounded up to 64); the codes follow it, 512 per block. */
#define KQC16_SBYTES(nb) ((32 * (nb) + 63) / 64 * 64)

#if defined(KL_IV_LOADU) && KL_FV_LANES == 16
/* The same unpacking from q8_0_c16: the group at g (nb blocks) already holds contract lane l's codes of its 16
 * columns as one vector per block (the stored byte is the int8 with its sign bit flipped, KQ32G_OFF's q8_0 code),
 * so a block is eight loads and one f16 conversion. Pad rows are zero bytes (d = +0; outputs not stored). */
KL_INLINE void kq32g_pack_c16(kq32g_blk *P, const uint8_t *g, int64_t nb, int64_t b0, int bc) {
    const uint8_t *codes = g + KQC16_SBYTES(nb);
    for (int bb = 0; bb < bc; bb++) {
        const int64_t b = b0 + bb;
        for (int l = 0; l < 8; l++) P[bb].q[l] = kl_iv_loadu(codes + 512 * b + 64 * l);
        kl_fv_store(P[bb].d, kl_fv_load_f16((const uint16_t *)(g + 32 * b)));
    }
}
#endif

/* A panel's source: the GGUF layout (rows at w, row stride wrow, nc rows), the q32_r8 groups at w (group stride gs;
 * the second group's offset g2: gs or 0) or the q8_0_c16 group at w (nb blocks). Blocks [b0, b0 + bc) into P. */
typedef struct {
    const uint8_t *w;
    int64_t wrow, gs, g2, nb;
    int nc, lay;
} kq32g_src;

KL_INLINE void kq32g_pack_src(kq32g_blk *P, const kq32g_src *s, int64_t b0, int bc, const int fmt) {
#if defined(KL_IV_R8)
    if (s->lay == KQ32G_R8) {
        kq32g_pack_r8(P, s->w, s->g2, b0, bc, fmt);
        return;
    }
#endif
#if defined(KL_IV_LOADU) && KL_FV_LANES == 16
    if (s->lay == KQ32G_C16) {
        kq32g_pack_c16(P, s->w, s->nb, b0, bc);
        return;
    }
#endif
    kq32g_pack(P, s->w, s->wrow, b0, bc, s->nc, fmt);
}

/* The vec_dot order: one activation row (x: its block at the chunk start) against G (<= KQ32G_NG) column
 * groups' panels (group g's at P + g * KQ32G_KB; bc blocks), which share the row's seeds, scales and quant
 * broadcasts; nc: the last group's columns. first: accumulators from +0, else from park (KQ32G_PARK
 * vectors per group); last: fold and store y (group g at y + g * KQ32G_L), else park. sdp: the row's seeds of
 * these blocks made once for every panel (kq32g_linear, one K chunk), or NULL: made here. */
KL_INLINE void kq32g_tile(float *y, int nc, const kq32g_blk *P, int bc, const uint8_t *x, float *park, int first,
                          int last, const int32_t (*sdp)[8], const int fmt, const int G) {
    const int64_t xblk = KL_Q32_XBLK(fmt), xq = KL_Q32_XQS(fmt);
    const int off = KQ32G_OFF(fmt), hasmin = KL_Q32_HASMIN(fmt);
    kl_fv acc[KQ32G_NG][8], sm[KQ32G_NG];
    for (int g = 0; g < G; g++) {
        for (int l = 0; l < 8; l++) acc[g][l] = first ? kl_fv_zero() : kl_fv_load(park + (g * KQ32G_PARK + l) * KQ32G_L);
        if (hasmin) sm[g] = first ? kl_fv_zero() : kl_fv_load(park + (g * KQ32G_PARK + 8) * KQ32G_L);
    }
    /* the seeds of the whole chunk first: the dot loop below broadcasts them from memory (computed next
     * to their use, the compiler extracts them from registers, an extra shuffle per dot) */
    int32_t sdl[KQ32G_KB][8] __attribute__((aligned(32)));
    const int32_t (*sd)[8] = sdp;
    if (off && !sdp) {
        for (int bb = 0; bb < bc; bb++) kl_q32_seeds(sdl[bb], (const int8_t *)(x + bb * xblk + xq), off);
        sd = (const int32_t (*)[8])sdl;
    }
    for (int bb = 0; bb < bc; bb++) {
        const uint8_t *xb = x + bb * xblk;
        const int8_t *xs = (const int8_t *)(xb + xq);
        const kl_fv dx = kl_fv_set1(kl_f32_f16(xb));
        kl_fv t[KQ32G_NG];
        for (int g = 0; g < G; g++) {
            const kq32g_blk *p = &P[g * KQ32G_KB + bb];
            t[g] = kl_fv_mul(kl_fv_load(p->d), dx);
            if (hasmin) sm[g] = kl_fv_fma(kl_fv_load(p->m), kl_fv_set1(kl_f32_f16(xb + 2)), sm[g]);
        }
        for (int l = 0; l < 8; l++) {
            for (int g = 0; g < G; g++) {
                const kl_iv iv = kl_iv_dp4(kl_iv_set1(off ? sd[bb][l] : KL_MAGIC_I), P[g * KQ32G_KB + bb].q[l], xs + 4 * l);
                acc[g][l] = kl_fv_fma(t[g], kl_fv_unmagic(iv), acc[g][l]);
            }
        }
    }
    for (int g = 0; g < G; g++) {
        if (!last) {
            for (int l = 0; l < 8; l++) kl_fv_store(park + (g * KQ32G_PARK + l) * KQ32G_L, acc[g][l]);
            if (hasmin) kl_fv_store(park + (g * KQ32G_PARK + 8) * KQ32G_L, sm[g]);
            continue;
        }
        const kl_fv g0 = kl_fv_add(kl_fv_add(acc[g][0], acc[g][4]), kl_fv_add(acc[g][2], acc[g][6]));
        const kl_fv g1 = kl_fv_add(kl_fv_add(acc[g][1], acc[g][5]), kl_fv_add(acc[g][3], acc[g][7]));
        kl_fv f = kl_fv_add(g0, g1);
        if (hasmin) f = kl_fv_add(f, sm[g]);
        kl_fv_storen(y + g * KQ32G_L, f, g == G - 1 ? nc : KQ32G_L);
    }
}

/* The repacked order (q4_0, N % 8 == 0): MT activation rows (x: the first row's block at the chunk start,
 * row stride xrow bytes) against G groups' panels, one chain per (row, group); park: KQ32G_NG * KQ32G_PARK
 * vectors per row (the first G used); y: the first row's first column (row stride N). */
KL_INLINE void kq32g_tile1(float *y, int64_t N, int nc, const kq32g_blk *P, int bc, const uint8_t *x, int64_t xrow,
                           float *park, int first, int last, const int fmt, const int MT, const int G) {
    const int64_t xblk = KL_Q32_XBLK(fmt), xq = KL_Q32_XQS(fmt);
    const int off = KQ32G_OFF(fmt);
    const int64_t pstride = KQ32G_NG * KQ32G_PARK * KQ32G_L;
    kl_fv acc[KQ32G_MT1][KQ32G_NG];
    for (int r = 0; r < MT; r++)
        for (int g = 0; g < G; g++) acc[r][g] = first ? kl_fv_zero() : kl_fv_load(park + r * pstride + g * KQ32G_L);
    int32_t sd[KQ32G_KB][KQ32G_MT1]; /* the seeds first (broadcast from memory below, as in kq32g_tile) */
    for (int bb = 0; bb < bc; bb++)
        for (int r = 0; r < MT; r++)
            sd[bb][r] = (int32_t)((uint32_t)KL_MAGIC_I -
                                  (uint32_t)off * (uint32_t)kl_q32_xsum((const int8_t *)(x + r * xrow + bb * xblk + xq)));
    for (int bb = 0; bb < bc; bb++) {
        kl_iv iv[KQ32G_MT1][KQ32G_NG];
        for (int r = 0; r < MT; r++)
            for (int g = 0; g < G; g++) iv[r][g] = kl_iv_set1(sd[bb][r]);
        for (int l = 0; l < 8; l++)
            for (int g = 0; g < G; g++) {
                const kl_iv wq = P[g * KQ32G_KB + bb].q[l];
                for (int r = 0; r < MT; r++)
                    iv[r][g] = kl_iv_dp4(iv[r][g], wq, (const int8_t *)(x + r * xrow + bb * xblk + xq) + 4 * l);
            }
        for (int r = 0; r < MT; r++) {
            const kl_fv dx = kl_fv_set1(kl_f32_f16(x + r * xrow + bb * xblk));
            for (int g = 0; g < G; g++)
                acc[r][g] = kl_fv_fma(kl_fv_unmagic(iv[r][g]), kl_fv_mul(kl_fv_load(P[g * KQ32G_KB + bb].d), dx), acc[r][g]);
        }
    }
    for (int r = 0; r < MT; r++)
        for (int g = 0; g < G; g++) {
            if (last) kl_fv_storen(y + r * N + g * KQ32G_L, acc[r][g], g == G - 1 ? nc : KQ32G_L);
            else kl_fv_store(park + r * pstride + g * KQ32G_L, acc[r][g]);
        }
}

#if defined(KL_TILE)
/* The repacked order on tiles (lanes headers with KL_TILE, km_lanes_avx512_amx.h): 16 activation rows (x: the first
 * row's block at the chunk start, row stride xrow bytes; dxf: their f32 scales, row r's block bb at r * ds + bb)
 * against G (<= KQ32G_NG) groups' panels (group g's at P + g * KQ32G_KB; bc blocks), whose weights as signed bytes
 * (code - offset) are at S in the tile's B layout (group g's block bb at S + (g * KQ32G_KB + bb) * 512: the block's
 * q[0..7]); nc: the last group's columns. Per
 * (row, column) one chain from +0 (or its parked value at park + r * pstride + g * KQ32G_L): acc = fma((float)isum,
 * d * dx, acc)
 * over the blocks in increasing order, isum the block's exact int32 sum of its 32 products, which the tile gives
 * whole: kq32g_tile1's float steps in kq32g_tile1's order, so kq32g_tile1's bits. */
KL_INLINE void kq32g_ttile(float *y, int64_t N, int nc, const kq32g_blk *P, const int8_t *S, int bc, const uint8_t *x,
                           int64_t xrow, const float *dxf, int64_t ds, float *park, int64_t pstride, int first,
                           int last, const int fmt, const int G) {
    const int64_t xblk = KL_Q32_XBLK(fmt), xq = KL_Q32_XQS(fmt);
    int32_t cb[2][KQ32G_NG][256] __attribute__((aligned(64))); /* a block's sums while the tiles make the next one's */
    kl_fv acc[KQ32G_NG][16];
    for (int g = 0; g < G; g++)
        for (int r = 0; r < 16; r++) acc[g][r] = first ? kl_fv_zero() : kl_fv_load(park + r * pstride + g * KQ32G_L);
    kl_tile_sums(cb[0][0], G > 1 ? cb[0][1] : NULL, x + xq, xrow, S, S + KQ32G_KB * 512);
    for (int bb = 0; bb < bc; bb++) {
        if (bb + 1 < bc) /* the next block's sums first: the tile unit works while the float steps below run */
            kl_tile_sums(cb[(bb + 1) & 1][0], G > 1 ? cb[(bb + 1) & 1][1] : NULL, x + (bb + 1) * xblk + xq, xrow,
                         S + (bb + 1) * 512, S + (KQ32G_KB + bb + 1) * 512);
        for (int g = 0; g < G; g++) {
            const kl_fv d = kl_fv_load(P[g * KQ32G_KB + bb].d);
            const int32_t *c = cb[bb & 1][g];
            for (int r = 0; r < 16; r++)
                acc[g][r] = kl_fv_fma(kl_fv_from_i32(c + 16 * r), kl_fv_mul(d, kl_fv_set1(dxf[r * ds + bb])), acc[g][r]);
        }
    }
    for (int g = 0; g < G; g++)
        for (int r = 0; r < 16; r++) {
            if (last) kl_fv_storen(y + r * N + g * KQ32G_L, acc[g][r], g == G - 1 ? nc : KQ32G_L);
            else kl_fv_store(park + r * pstride + g * KQ32G_L, acc[g][r]);
        }
}
#endif

#if defined(KQ32G_LMT)
#ifndef KL_IV_DP4U
#error "linear/q32_gemm_body.h: KQ32G_LMT needs kl_iv_dp4u (KL_IV_DP4U) of the lanes header"
#endif
#if KQ32G_LMT < 4 || KQ32G_LMT > 16
#error "linear/q32_gemm_body.h: KQ32G_LMT must be 4..16 (the row tail goes in tiles of 4, 2 and 1)"
#endif
/* The vec_dot order of the offset formats (q4_0, q5_0), lane-outer (KQ32G_LMT: rows per tile). The exact lane
 * integer is formed the other way round: the weight as a signed byte (code - offset) times the activation
 * quant with its sign bit flipped (x + 128, an unsigned byte), minus 128 * (the 4 weights' sum):
 * sum w * (x + 128) - 128 * sum w = sum w * x. The correction is the weight's, so it is unpacked once per
 * panel with the weights (seed s[l] = KL_MAGIC_I - 128 * sum) instead of being broadcast per activation row
 * and block; pair sums |w| * 255 * 2 <= 8160 stay in int16. The tile walks contract lane l outermost, the
 * blocks in order inside, KQ32G_LMT rows sharing each weight vector: each (row, column) lane chain still
 * runs fma(t, lane, acc) over the blocks in increasing order from +0 (or its parked value), and the fold
 * ((a0 + a4) + (a2 + a6)) + ((a1 + a5) + (a3 + a7)) is the same, so the bits are those of kq32g_tile.
 * Why: on AVX2 (Zen 3) kq32g_tile's three loads per lane step (weights, quant broadcast, seed broadcast)
 * bound it; here a lane step loads the quant broadcast and t, the weight and seed once per LMT rows. */
typedef struct {
    kl_iv w[8];       /* contract lane l: lane c = column c's weights 4l..4l+3 as signed bytes (code - offset) */
    kl_iv s[8];       /* KL_MAGIC_I - 128 * (the sum of those 4 weights) */
    float d[KQ32G_L]; /* f32 of the column's f16 d (+0 past the group) */
} __attribute__((aligned(64))) kq32g_lblk;

KL_INLINE void kq32g_lpack(kq32g_lblk *P, const kq32g_src *src, int64_t b0, int bc, const int fmt) {
    static const uint8_t ones[4] = {1, 1, 1, 1};
    const uint32_t add = 0x01010101u * (uint32_t)(128 - KL_Q32_OFF(fmt)); /* code + 128 - off <= 31 + 120: no carry */
    const int step = src->lay == KQ32G_R8 ? 2 : 1; /* q32_r8 unpacks a tile (two blocks) at a time */
    for (int bb = 0; bb < bc; bb += step) {
        kq32g_blk u[2];
        kq32g_pack_src(u, src, b0 + bb, step, fmt);
        for (int i = 0; i < step; i++)
            for (int l = 0; l < 8; l++) { /* (code + 128 - off) ^ 0x80 = code - off as a signed byte */
                const kl_iv ws = kl_iv_xor(kl_iv_add(u[i].q[l], kl_iv_set1((int32_t)add)), kl_iv_set1((int32_t)0x80808080u));
                P[bb + i].w[l] = ws;
                P[bb + i].s[l] = kl_iv_add(kl_iv_set1(KL_MAGIC_I), kl_iv_mullo(kl_iv_dp4u(kl_iv_zero(), ws, ones), kl_iv_set1(-128)));
            }
        for (int i = 0; i < step; i++) kl_fv_store(P[bb + i].d, kl_fv_load(u[i].d));
    }
}

/* The rows' activation quants with the sign bit flipped (x + 128, unsigned bytes) and their f16 scales as f32, for
 * rows [0, rows) x blocks [0, bc) at x (row stride xrow bytes): row r's at xu + r * KQ32G_KB, dxf + r * KQ32G_KB. */
KL_INLINE void kq32g_lprep(uint8_t (*xu)[32], float *dxf, const uint8_t *x, int64_t xrow, int64_t rows, int bc,
                           const int fmt) {
    const int64_t xblk = KL_Q32_XBLK(fmt), xq = KL_Q32_XQS(fmt);
    for (int64_t r = 0; r < rows; r++)
        for (int bb = 0; bb < bc; bb++) {
            const uint8_t *xb = x + r * xrow + bb * xblk;
            for (int i = 0; i < 32; i++) xu[r * KQ32G_KB + bb][i] = (uint8_t)(xb[xq + i] ^ 0x80u);
            dxf[r * KQ32G_KB + bb] = kl_f32_f16(xb);
        }
}

/* MT (<= KQ32G_LMT) activation rows, prepared by kq32g_lprep (xu, dxf: the first row's), against one group's panel P
 * (bc blocks); park: row r's 8 lane vectors at park + r * pstride; first / last as kq32g_tile; y: the first row's
 * first column (row stride N), nc columns. */
KL_INLINE void kq32g_ltile(float *y, int64_t N, int nc, const kq32g_lblk *P, int bc, const uint8_t (*xu)[32],
                           const float *dxf, float *park, int64_t pstride, int first, int last, const int MT) {
    float tb[KQ32G_KB][KQ32G_LMT][KQ32G_L] __attribute__((aligned(64)));       /* t = d * dx per column */
    float lanes[KQ32G_LMT][8][KQ32G_L] __attribute__((aligned(64)));           /* the last chunk's lanes */
    for (int bb = 0; bb < bc; bb++) {
        const kl_fv d = kl_fv_load(P[bb].d);
        for (int r = 0; r < MT; r++) kl_fv_store(tb[bb][r], kl_fv_mul(d, kl_fv_set1(dxf[r * KQ32G_KB + bb])));
    }
    for (int l = 0; l < 8; l++) {
        kl_fv acc[KQ32G_LMT];
        for (int r = 0; r < MT; r++) acc[r] = first ? kl_fv_zero() : kl_fv_load(park + r * pstride + l * KQ32G_L);
        for (int bb = 0; bb < bc; bb++) {
            const kl_iv wv = P[bb].w[l], sv = P[bb].s[l];
            for (int r = 0; r < MT; r++)
                acc[r] = kl_fv_fma(kl_fv_load(tb[bb][r]), kl_fv_unmagic(kl_iv_dp4u(sv, wv, xu[r * KQ32G_KB + bb] + 4 * l)), acc[r]);
        }
        for (int r = 0; r < MT; r++) kl_fv_store(last ? lanes[r][l] : park + r * pstride + l * KQ32G_L, acc[r]);
    }
    if (!last) return;
    for (int r = 0; r < MT; r++) {
        const kl_fv g0 = kl_fv_add(kl_fv_add(kl_fv_load(lanes[r][0]), kl_fv_load(lanes[r][4])),
                                   kl_fv_add(kl_fv_load(lanes[r][2]), kl_fv_load(lanes[r][6])));
        const kl_fv g1 = kl_fv_add(kl_fv_add(kl_fv_load(lanes[r][1]), kl_fv_load(lanes[r][5])),
                                   kl_fv_add(kl_fv_load(lanes[r][3]), kl_fv_load(lanes[r][7])));
        kl_fv_storen(y + r * N, kl_fv_add(g0, g1), nc);
    }
}
#endif

/* The weights the next panel chunk will unpack, prefetched (to L2) a few lines per row tile while the
 * current one is read: the unpacking gathers walk 16 rows at once, which the hardware prefetchers follow
 * poorly from DRAM. */
typedef struct {
    const uint8_t *w; /* the first row's first byte */
    int64_t wrow, lines, total, next;
} kq32g_pf;

KL_INLINE void kq32g_pf_set(kq32g_pf *pf, const uint8_t *w, int64_t wrow, int64_t rows, int64_t bytes) {
    pf->w = w;
    pf->wrow = wrow;
    pf->lines = (bytes + 63) / 64;
    pf->total = rows > 0 ? rows * pf->lines : 0;
    pf->next = 0;
}

KL_INLINE void kq32g_pf_step(kq32g_pf *pf, int64_t count) {
    for (int64_t e = pf->next + count < pf->total ? pf->next + count : pf->total; pf->next < e; pf->next++)
        kl_prefetch_l2(pf->w + (pf->next / pf->lines) * pf->wrow + 64 * (pf->next % pf->lines));
}

/* The source of the panel of G groups of KQ32G_L columns at column n (nc: the last group's), group g's. */
KL_INLINE kq32g_src kq32g_src_at(const uint8_t *w, int64_t wrow, int64_t nb, int64_t n, int g, int G, int nc,
                                 const int lay) {
    kq32g_src s;
    const int cols = g == G - 1 ? nc : KQ32G_L;
    s.wrow = wrow;
    s.nb = nb;
    s.nc = cols;
    s.lay = lay;
    s.gs = lay == KQ32G_C16 ? KQC16_SBYTES(nb) + 512 * nb : 8 * wrow; /* a group's bytes */
    s.g2 = cols > 8 ? s.gs : 0;
    s.w = lay == KQ32G_R8    ? w + (n + g * KQ32G_L) / 8 * s.gs
          : lay == KQ32G_C16 ? w + (n + g * KQ32G_L) / 16 * s.gs
                             : w + (n + g * KQ32G_L) * wrow;
    return s;
}

/* Columns [n0, n1) of y (row stride N) for all M rows (activation rows of nb blocks of format fmt's
 * activation type at x); one: the repacked order, else the vec_dot order. lay: w's layout, KQ32G_GGUF, KQ32G_R8
 * (then n0 is a multiple of 8, nb and KQ32G_KB are even and the lanes header has KL_IV_R8) or KQ32G_C16 (q8_0,
 * 16-lane headers with KL_IV_LOADU; n0 a multiple of 16). */
static void kq32g_linear(float *y, const uint8_t *w, const uint8_t *x, int64_t M, int64_t N, int64_t nb, int64_t n0,
                         int64_t n1, const int fmt, const int one, const int lay) {
    const int64_t wblk = KL_Q32_WBLK(fmt), xblk = KL_Q32_XBLK(fmt);
    const int64_t wrow = nb * wblk, xrow = nb * xblk;
    const int64_t gc16 = KQC16_SBYTES(nb) + 512 * nb; /* a q8_0_c16 group's bytes */
    kq32g_blk P[KQ32G_NG * KQ32G_KB];
    float park[KQ32G_MS * KQ32G_NG * KQ32G_PARK * KQ32G_L] __attribute__((aligned(64)));
    const int chunked = nb > KQ32G_KB;
#if defined(KL_TILE)
    /* the repacked order's 16-row tiles on AMX (kq32g_ttile), when the OS grants the tile state */
    int8_t S[KQ32G_NG * KQ32G_KB * 512] __attribute__((aligned(64)));
    int tiles = one && M >= 16 ? kl_tile_begin() : 0;
    float *dxa = NULL; /* every activation row's f32 block scales (row r's block b at r * nb + b), made once per call */
    if (tiles && !(dxa = malloc((size_t)(M * nb) * sizeof(float)))) {
        kl_tile_end();
        tiles = 0; /* no memory: kq32g_tile1 (the same bits) */
    }
    for (int64_t r = 0; tiles && r < M; r++)
        for (int64_t b = 0; b < nb; b++) dxa[r * nb + b] = kl_f32_f16(x + r * xrow + b * xblk);
#endif
#if defined(KQ32G_LMT)
    kq32g_lblk PL[KQ32G_KB];
    const int lout = !one && fmt != KL_Q32_Q8_0 && !KL_Q32_HASMIN(fmt); /* the offset formats' vec_dot order */
    const int NG = lout ? 1 : KQ32G_NG;
#else
    const int lout = 0;
    const int NG = KQ32G_NG; /* column groups per panel */
#endif
    /* One K chunk, the vec_dot order of an offset format (kq32g_tile): a super-tile's seeds are made once for all
     * its panels (they depend on the activation block only; made per panel they were ~10% of q5_0's GEMM at
     * K = 640 on Zen 5), in super-tiles of up to KQ32G_SDR rows */
    const int pre = !one && !lout && !chunked && KQ32G_OFF(fmt) != 0;
    int32_t sdb[KQ32G_SDR * KQ32G_KB][8] __attribute__((aligned(32)));
#if defined(KQ32G_LMT)
    /* one chunk: the super-tile's rows prepared once (kq32g_lprep), not once per column group */
    uint8_t xu[KQ32G_LXS * KQ32G_KB][32] __attribute__((aligned(32)));
    float dxf[KQ32G_LXS * KQ32G_KB] __attribute__((aligned(32)));
    const int64_t MS = chunked ? KQ32G_MS : lout ? KQ32G_LXS : pre && M > KQ32G_SDR ? KQ32G_SDR : M;
#else
    const int64_t MS = chunked ? KQ32G_MS : pre && M > KQ32G_SDR ? KQ32G_SDR : M; /* one chunk: nothing parked */
#endif
    for (int64_t m0 = 0; m0 < M; m0 += MS) {
        const int64_t ms = M - m0 < MS ? M - m0 : MS;
#if defined(KQ32G_LMT)
        if (lout && !chunked) kq32g_lprep(xu, dxf, x + m0 * xrow, xrow, ms, (int)nb, fmt);
#endif
        if (pre)
            for (int64_t r = 0; r < ms; r++)
                for (int64_t bb = 0; bb < nb; bb++)
                    kl_q32_seeds(sdb[r * KQ32G_KB + bb], (const int8_t *)(x + (m0 + r) * xrow + bb * xblk + KL_Q32_XQS(fmt)),
                                 KQ32G_OFF(fmt));
        for (int64_t n = n0; n < n1; n += NG * KQ32G_L) {
            const int64_t left = n1 - n;
            const int G = left > KQ32G_L && NG > 1 ? 2 : 1;
            const int nc = left - (G - 1) * KQ32G_L < KQ32G_L ? (int)(left - (G - 1) * KQ32G_L) : KQ32G_L;
            for (int64_t b0 = 0; b0 < nb; b0 += KQ32G_KB) {
                const int bc = nb - b0 < KQ32G_KB ? (int)(nb - b0) : KQ32G_KB;
                const int first = b0 == 0, last = b0 + bc == nb;
#if defined(KQ32G_LMT)
                if (lout) {
                    const kq32g_src src = kq32g_src_at(w, wrow, nb, n, 0, 1, nc, lay);
                    kq32g_lpack(PL, &src, b0, bc, fmt);
                } else
#endif
                for (int g = 0; g < G; g++) {
                    const kq32g_src src = kq32g_src_at(w, wrow, nb, n, g, G, nc, lay);
                    kq32g_pack_src(P + g * KQ32G_KB, &src, b0, bc, fmt);
                }
#if defined(KL_TILE)
                if (tiles)
                    for (int g = 0; g < G; g++)
                        for (int bb = 0; bb < bc; bb++)
                            for (int l = 0; l < 8; l++)
                                kl_iv_store(S + (g * KQ32G_KB + bb) * 512 + 64 * l, kl_iv_sub8(P[g * KQ32G_KB + bb].q[l], KQ32G_OFF(fmt)));
#endif
                kq32g_pf pf; /* the next chunk of this panel, else the next panel's first (q32_r8: per group of 8
                              * rows one range, the group's tiles of those blocks) */
                if (!last) {
                    const int64_t bn = nb - b0 - bc < KQ32G_KB ? nb - b0 - bc : KQ32G_KB;
                    const int64_t rows = n1 - n < NG * KQ32G_L ? n1 - n : NG * KQ32G_L;
                    if (lay == KQ32G_R8)
                        kq32g_pf_set(&pf, w + n / 8 * 8 * wrow + (b0 + bc) * 8 * wblk, 8 * wrow, (rows + 7) / 8, bn * 8 * wblk);
                    else if (lay == KQ32G_C16)
                        kq32g_pf_set(&pf, w + n / 16 * gc16 + KQC16_SBYTES(nb) + (b0 + bc) * 512, gc16, (rows + 15) / 16,
                                     bn * 512);
                    else
                        kq32g_pf_set(&pf, w + n * wrow + (b0 + bc) * wblk, wrow, rows, bn * wblk);
                } else {
                    const int64_t nn = n + NG * KQ32G_L, rn = n1 - nn < NG * KQ32G_L ? n1 - nn : NG * KQ32G_L;
                    const int64_t bn = nb < KQ32G_KB ? nb : KQ32G_KB;
                    if (lay == KQ32G_R8)
                        kq32g_pf_set(&pf, w + nn / 8 * 8 * wrow, 8 * wrow, (rn + 7) / 8, bn * 8 * wblk);
                    else if (lay == KQ32G_C16)
                        kq32g_pf_set(&pf, w + nn / 16 * gc16 + KQC16_SBYTES(nb), gc16, (rn + 15) / 16, bn * 512);
                    else
                        kq32g_pf_set(&pf, w + nn * wrow, wrow, rn, bn * wblk);
                }
                const int64_t pfs = (pf.total + ms - 1) / ms; /* lines per activation row */
                float *yb = y + m0 * N + n;
                const uint8_t *xb = x + m0 * xrow + b0 * xblk;
                int64_t m = 0;
#if defined(KQ32G_LMT)
                if (lout) {
                    const int64_t ps = KQ32G_NG * KQ32G_PARK * KQ32G_L; /* the vec_dot order's park stride */
                    for (; m < ms;) {
                        const int64_t left = ms - m;
                        const int mt = left >= KQ32G_LMT ? KQ32G_LMT : left >= 4 ? 4 : left >= 2 ? 2 : 1;
                        float *pk = chunked ? park + m * ps : park;
                        kq32g_pf_step(&pf, mt * pfs);
                        uint8_t (*tu)[32] = xu + m * KQ32G_KB;
                        float *td = dxf + m * KQ32G_KB;
                        if (chunked) { /* the tile's rows of this chunk, in the buffer's first rows */
                            tu = xu;
                            td = dxf;
                            kq32g_lprep(tu, td, xb + m * xrow, xrow, mt, bc, fmt);
                        }
                        switch (mt) {
                        case KQ32G_LMT: kq32g_ltile(yb + m * N, N, nc, PL, bc, tu, td, pk, ps, first, last, KQ32G_LMT); break;
#if KQ32G_LMT > 4
                        case 4: kq32g_ltile(yb + m * N, N, nc, PL, bc, tu, td, pk, ps, first, last, 4); break;
#endif
                        case 2: kq32g_ltile(yb + m * N, N, nc, PL, bc, tu, td, pk, ps, first, last, 2); break;
                        default: kq32g_ltile(yb + m * N, N, nc, PL, bc, tu, td, pk, ps, first, last, 1); break;
                        }
                        m += mt;
                    }
                    continue;
                }
#endif
                if (one) {
                    const int64_t ps = KQ32G_NG * KQ32G_PARK * KQ32G_L;
#if defined(KL_TILE)
                    for (; tiles && m + 16 <= ms; m += 16) {
                        float *pk = chunked ? park + m * ps : park;
                        kq32g_pf_step(&pf, 16 * pfs);
#if KQ32G_NG > 1
                        if (G == 2) {
                            kq32g_ttile(yb + m * N, N, nc, P, S, bc, xb + m * xrow, xrow, dxa + (m0 + m) * nb + b0, nb, pk,
                                        ps, first, last, fmt, 2);
                            continue;
                        }
#endif
                        kq32g_ttile(yb + m * N, N, nc, P, S, bc, xb + m * xrow, xrow, dxa + (m0 + m) * nb + b0, nb, pk, ps,
                                    first, last, fmt, 1);
                    }
#endif
                    for (; m + KQ32G_MT1 <= ms; m += KQ32G_MT1) {
                        float *pk = chunked ? park + m * ps : park;
                        kq32g_pf_step(&pf, KQ32G_MT1 * pfs);
#if KQ32G_NG > 1
                        if (G == 2) {
                            kq32g_tile1(yb + m * N, N, nc, P, bc, xb + m * xrow, xrow, pk, first, last, fmt, KQ32G_MT1, 2);
                            continue;
                        }
#endif
                        kq32g_tile1(yb + m * N, N, nc, P, bc, xb + m * xrow, xrow, pk, first, last, fmt, KQ32G_MT1, 1);
                    }
                    for (; m < ms; m++) {
                        float *pk = chunked ? park + m * ps : park;
                        kq32g_pf_step(&pf, pfs);
#if KQ32G_NG > 1
                        if (G == 2) {
                            kq32g_tile1(yb + m * N, N, nc, P, bc, xb + m * xrow, xrow, pk, first, last, fmt, 1, 2);
                            continue;
                        }
#endif
                        kq32g_tile1(yb + m * N, N, nc, P, bc, xb + m * xrow, xrow, pk, first, last, fmt, 1, 1);
                    }
                } else {
                    float *pk = park;
                    for (; m < ms; m++, pk += chunked ? KQ32G_NG * KQ32G_PARK * KQ32G_L : 0) {
                        kq32g_pf_step(&pf, pfs);
#if KQ32G_NG > 1
                        if (G == 2) {
                            kq32g_tile(yb + m * N, nc, P, bc, xb + m * xrow, pk, first, last,
                                       pre ? (const int32_t (*)[8])sdb[m * KQ32G_KB] : NULL, fmt, 2);
                            continue;
                        }
#endif
                        kq32g_tile(yb + m * N, nc, P, bc, xb + m * xrow, pk, first, last,
                                   pre ? (const int32_t (*)[8])sdb[m * KQ32G_KB] : NULL, fmt, 1);
                    }
                }
            }
        }
    }
#if defined(KL_TILE)
    if (tiles) kl_tile_end();
    free(dxa);
#endif
}

#endif /* KM_Q32_GEMM_BODY_H */
