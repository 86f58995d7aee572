/* linear/q32_r8_body.h — the linear of the 32-element nibble formats on weights in the repacked layout "q32_r8"
 * (weights/repack.py packs it): its own decode loop (one activation row at a time, M < KQ32G_MIN_M) and, for
 * M >= KQ32G_MIN_M when the instantiation sets the schedule, linear/q32_gemm_body.h's prefill GEMM on panels
 * unpacked from this layout (kq32g_pack_r8: row loads and a dword transpose, no gathers); written once; every x86
 * variant (AVX2, AVX-512, AVX-512 VNNI) of every format is an instantiation of it. The format fmt (KL_Q32_Q4_0,
 * KL_Q32_Q4_1, KL_Q32_Q5_0, KL_Q32_Q5_1: a compile-time constant the entry point passes) picks the contract:
 * linear.q4_0.q8_0.ggml.v1, linear.q4_1.q8_1.ggml.v1, linear.q5_0.q8_0.ggml.v1, linear.q5_1.q8_1.ggml.v1.
 *
 * Layout "q32_r8" (K a multiple of 64, nb = K / 32 blocks per row, B = the format's block bytes: q4_0 18, q4_1 20,
 * q5_0 22, q5_1 24): rows in groups of 8 (ceil(N / 8) groups; the last group's rows >= N are zero bytes), group g
 * at g * (nb / 2) * 16B bytes, nb / 2 tiles of 16B bytes, tile j holding blocks b0 = 2j and b1 = 2j + 1 of the
 * group's 8 rows, its fields in this order:
 *   d:      [0, 16) the 8 rows' d of b0 (fp16, row order), [16, 32) the same for b1
 *   m:      (q4_1, q5_1) 32 bytes: the 8 rows' m of b0, then of b1
 *   H0, H1: (q5_0, q5_1) 2 x 32 bytes: byte i bit r = the fifth bit of value i of row r, block b0 (H0) / b1 (H1)
 *   nibbles: 256 bytes, row r's 32 at 32 r: byte i = (b0's code i & 15) | (b1's code i & 15) << 4
 * (q5_0: d at 0, H0 / H1 at 32, nibbles at 96; q4_0: nibbles at 32; q4_1: m at 32, nibbles at 64; q5_1: m at 32,
 * H0 / H1 at 64, nibbles at 128.) So a row's two blocks are one 32-byte load (the low / high nibbles are value i
 * of b0 / b1, already in the activation's byte order: no 16 -> 32 byte spread), a group's scales (and mins) are
 * 16-byte loads (vcvtph2ps gives the 8 rows' d: no per-row gather) and row r's fifth bits are its own bit r of
 * H0 / H1: one shift by the compile-time 4 - r puts every byte's bit r on bit 4 (bits that crossed bytes land
 * elsewhere and the & 0x10 drops them). linear/q32_ggml_body.h's AVX2 decode on the plain layout spent ~30% of
 * its q5_0 time building the fifth bits (broadcast, shuffle, and, compare per block) and ~13% gathering a row's
 * f16 scales.
 *
 * Numerics (exactly linear/<w>_<a>_ggml_ref.c on the plain layout, i.e. <w>_<a>_ggml_r8_ref.c), two orders:
 * - the vec_dot order (q5_0, q4_1, q5_1; q4_0 when N % 8 != 0): per output (m, n), eight f32 lanes acc[l] = +0;
 *   for the blocks b = 0, 1, ... in order, lane[l] = the exact int32 sum of the four products (code - off) * xq at
 *   4l..4l+3 (off = 16 q5_0, 8 q4_0, 0 q4_1 / q5_1), t = f32(fp16(w.d) * fp16(x.d)), acc[l] = fma(t,
 *   (float)lane[l], acc[l]); y = kl_f8_fold(acc). q4_1 / q5_1 also run summs = fma(fp16(w.m), fp16(x.s), summs)
 *   from +0 over the blocks in order (x.s: the q8_1 block's fp16 s) and store y = kl_f8_fold(acc) + summs; the
 *   8 rows' summs are one kl_f8 (lane = row, a tile's m fields are 16-byte loads). The lanes are
 *   vpmaddubsw(code, xq) + vpmaddwd(1) (or one vpdpbusd with VNNI: int16 pairs <= 2 * 31 * 128, so both are
 *   exact); with an offset km_lanes_x86.h's seed 0x4B400000 - off * xs4 (xs4 = the lane's four activation quants
 *   summed) is added, whose float minus 1.5 * 2^23 is the lane's exact float (kl_r8_dot); without one the
 *   int32 lane is converted as it is (kl_r8_dot0, one op fewer per row and block).
 * - llama.cpp's repacked q4_0x8 order (q4_0 when N % 8 == 0, as linear/q4_0_q8_0_ggml_ref.c chooses): per output
 *   one f32 chain acc = +0; for the blocks in order isum = the exact int32 sum of the block's 32 products
 *   (nibble - 8) * xq, t as above, acc = fma((float)isum, t, acc); y = acc. The 8 rows' isums of a tile's two
 *   blocks come out as two kl_f8 (lane = row: kl_r8_sums2 transposes the 8 rows' nibble bytes as dwords, so row
 *   r's products land in lane r, and adds -8 * the block's quant sum), the 8 rows' t are one vcvtph2ps and a
 *   multiply, so the 8 chains are one vector fma per block and y is one store. kqr8_linear picks the order by
 *   N % 8 at run time; each order is its own loop (kqr8_run's x8 is a compile-time constant).
 * A tile runs block b0's fmas then b1's, tiles in order: each chain is the ref's; rows, groups, threads and K
 * slices never split one chain.
 *
 * Schedule (the instantiating file defines these before including this header):
 *   KQR8_PF     software prefetch distance in bytes (to L2) ahead of the tile being read. A thread's groups are
 *               one contiguous byte range read forward (a group's 8 rows are adjacent), so the lines of the range
 *               KQR8_PF ahead of each tile are prefetched (across group ends; never past the tensor). AVX2 q5_0, one
 *               thread, N = 2048, K = 2048 streaming from DRAM (34 weight copies, 98 MB): no prefetch 20.0 GMAC/s,
 *               1 KB 23.6, 2 KB 24.8, 3-5 KB 25.9-26.0, 8 KB 25.0, 16 KB 24.1 (hot, the same shape: ~28), Zen 3
 *   KQR8_KS     blocks per K slice (even): the prepared activation slice (76 bytes per block) lives on the stack;
 *               longer rows run slice by slice with the accumulators parked between slices (and prefetch less
 *               usefully: the next tile of a group is a slice away)
 *   KQR8_NC     groups per chunk when a row has several slices (park: 256 bytes per group, 288 with mins)
 * Row pairs (lanes headers that define KL_R8P: AVX-512): the vec_dot order's group runs two rows per 512-bit vector
 * (kqr8_group_p: rows r and r + 1's 32 nibble bytes are adjacent, so one load; the fifth-bit plane, activation and
 * seeds duplicated into both halves once per tile; each row's t value picked into its half by one permute), four
 * passes per tile instead of eight; every lane's dots and fmas are the 256-bit path's, in its order. Hot, one core,
 * Zen 5, GMAC/s old -> new at N x K = 2048 x 640 / 640 x 2048 (medians of 300 calls, bytes equal): q5_0 VNNI 61 ->
 * 86 / 64 -> 95, AVX-512 40 -> 64 / 41 -> 70; q5_1 VNNI 61 -> 85 / 63 -> 93; q4_1 VNNI 75 -> 115 / 80 -> 128;
 * q4_0 at N % 8 != 0 VNNI 72 -> 124. q4_0's repacked order (N % 8 == 0) takes two adjacent groups per 16-lane vector
 * on those headers when K is one slice (kqr8_group_x8_p: the GEMM's kl_iv_r8_nib transpose, eight dots per block):
 * VNNI 71-82 -> 111-126 GMAC/s, AVX-512 72-73 -> 101-104 at the same shapes (and 1024 x 640). From DRAM
 * (benchmarks/ab_linear.py --cold 64), one activation row: q5_0's row pairs 1.12x on one thread, 1.0x on two (the
 * memory binds); the two-group q4_0 loop 0.90-1.16x across runs (neutral within the noise); batches of 4-8 rows
 * (serve's batched decode, each group reread per row): q4_0 1.18-1.23x on one thread, 1.03-1.13x on two, q5_0 1.37x.
 * Gemma 3 270M's q5_0 decode ops (in-process A/B, profiled builds, noisy host): 2-7% less time; the weights come from
 * DRAM, so the gain is the compute the stream no longer waits for.
 * The fifth bits and the dots are the lanes header's kl_r8_code, kl_r8_dot, kl_r8_dot0 and kl_r8_sums2
 * (km_lanes_x86.h): on AVX-512 BW row r's fifth bits are a mask register (vptestmb against 1 << r) and a masked
 * byte add of 16, on AVX2 the shift and & 0x10 above or-ed into the nibbles; with AVX-512 VNNI a lane's int32 is
 * one vpdpbusd, else vpmaddubsw, vpmaddwd (and the seed's add).
 * AVX2 cost per tile (8 rows x 2 blocks), vector ALU ops of the hot loop in gcc 12's code: q5_0 ~154 (32 integer
 * multiplies, 16 fmas, 22 shifts, 64 logic / integer adds, 16 float subtracts, 4 for the t; ~50 loads), q5_1 ~142
 * (no seed add, no magic subtract: converts; 2 more fmas and converts for the min chains), q4_0 vec_dot order ~108,
 * q4_1 ~96, q4_0 repacked order ~90 (24 of them shuffles: the dword transpose). q32_ggml_body.h's decode spends
 * ~230 vector ops (and scalar work packing the scales) on the same 16 q5_0 row-blocks of the plain layout.
 * Hot (L2 / L3 resident), one thread, Zen 3 at ~3.1 GHz, GMAC/s for N x K = 2048 x 640, 640 x 2048, 2048 x 2048
 * (medians of 3 runs; the GGUF-layout AVX2 kernel in brackets): q4_0 N % 8 == 0 43.2, 44.1, 42.2 (24.7, 23.9,
 * 24.5; N = 2047: 34.5 against 22.8), q4_1 34.2, 38.5, 36.8 (17.7, 18.9, 19.3), q5_0 25.5, 27.1, 27.3 (16.4, 17.5,
 * 17.6), q5_1 26.1, 27.3, 27.0 (13.5, 14.2, 14.2); q5_0 ~59 cycles per tile, q4_0's repacked order ~37.
 * Streaming 2048 x 2048 from DRAM: one thread q4_0 26.3 GMAC/s (19.9), q4_1 23.6 (13.6), q5_0 21.5 (12.7), q5_1
 * 21.6 (11.8), i.e. 14.8-16.2 GB/s of weights, at this host's one-core read bandwidth (a plain AVX2 read loop:
 * 14-16 GB/s); two threads (7 runs) q4_0 25-31 GB/s (20.6-23.5), q4_1 26-36 (14.4-15.7), q5_0 25-31 (16.0-17.7),
 * q5_1 29-33 (16.2-18.3), the spread run to run (the plain read loop on two threads: 22-27 GB/s).
 * Measured and dropped: 4 rows per pass over K instead of 8 (q5_0: -9%: the t, the H loads and the loop are per
 * pass), 2 rows (-23%); fifth bits by and + vpminub (bit r kept, clamped to 16) instead of the shift (-13%: seven
 * more live constants); the activation operands and the dot's constants forced to memory operands (no spills left,
 * but -9%: loads); the eight folds as one transposed vector tree (-7% to 0 between builds: code placement);
 * prefetch off when hot (no gain); for q4_0's repacked order, per-row vpmaddubsw on the untransposed rows and a
 * transposing reduction of the 16 int16 products vectors (three unpack / add levels and a widening add, 2 x 25 ops
 * per tile; -3 to -5% against the dword transpose); the t values double-buffered by tile parity (the broadcasts
 * then address one base register instead of gcc's hoisted per-row pointers: within +-3% for q4_0, q4_1, q5_1).
 * With the repacked order's group call in the vec_dot order's loop (a branch compile-time false for the other
 * formats) gcc 12 scheduled q5_0's loop differently (the same instructions) and it ran 9-11% slower than before
 * this body took other formats; with kqr8_run per order it runs as before (0.98-1.03 of the previous body, same
 * binary, hot and from DRAM). KQR8_PF for two threads from DRAM (2-12 KB): no distance stood out of the ~15%
 * run-to-run spread, so every format keeps q5_0's 4 KB. The eight accumulators, the
 * constants, H0 / H1 and the activation operands exceed AVX2's 16 ymm: gcc parks 2-6 accumulators on the stack
 * (fma from memory, store), which measured cheaper than the alternatives.
 * Partition: groups of 8 output columns (km_part over ceil(N / 8)), the GEMM's too; a thread writes y only for its
 * groups' rows below N; no output depends on M, the slices, the GEMM's blocking or (ith, nth) (the GEMM computes
 * the same two orders: linear/q32_gemm_body.h).
 * The instantiating file defines the entry point (linear.token_major.v1 ABI) as a call of kqr8_linear.
 */
#ifndef KM_Q32_R8_BODY_H
#define KM_Q32_R8_BODY_H

#include "km_lanes.h"
#include "q32_r8_layout.h"
#ifdef KQ32G_NG /* the instantiation also sets the prefill GEMM's schedule (panels unpacked from this layout) */
#ifndef KL_IV_R8
#error "linear/q32_r8_body.h: the prefill GEMM on q32_r8 needs the lanes header's KL_IV_R8 ops"
#endif
#if (KQ32G_KB) % 2 != 0
#error "linear/q32_r8_body.h: KQ32G_KB must be even (a q32_r8 tile is two blocks)"
#endif
#include "q32_gemm_body.h"
#endif

#define KQR8_X8(fmt, N) ((fmt) == KL_Q32_Q4_0 && (N) % 8 == 0)              /* q4_0's repacked order */
#define KQR8_PARK(fmt) (64 + 8 * KL_Q32_HASMIN(fmt))                         /* floats parked per group */

#if (KQR8_KS) % 2 != 0
#error "KQR8_KS must be even (a tile is two blocks)"
#endif

#ifndef KL_R8
#error "linear/q32_r8_body.h needs the q32_r8 lanes ops (KL_R8, km_lanes.h)"
#endif

/* One activation row's slice of blocks, prepared once per call (per chunk when sliced): each block's 32 quants,
 * its seeds (the vec_dot order with a code offset), its d as f32, its s as f32 (q8_1) and -8 * its quant sum
 * (q4_0's repacked order). 32-byte aligned rows: the dots read them as memory operands. */
typedef struct {
    int8_t q[KQR8_KS][32] __attribute__((aligned(32)));
    int32_t seed[KQR8_KS][8] __attribute__((aligned(32)));
    float dx[KQR8_KS];
    float sx[KQR8_KS];
    int32_t xo[KQR8_KS];
} kqr8_xrow;

/* x: the slice's first activation block (q8_0, or q8_1 for the min formats); ks blocks; x8: q4_0's repacked order. */
KL_INLINE void kqr8_prep(kqr8_xrow *r, const uint8_t *x, int64_t ks, const int fmt, const int x8) {
    for (int64_t b = 0; b < ks; b++) {
        const uint8_t *blk = x + b * KL_Q32_XBLK(fmt);
        const int8_t *qs = (const int8_t *)(blk + KL_Q32_XQS(fmt));
        memcpy(r->q[b], qs, 32);
        if (x8)
            r->xo[b] = -8 * kl_q32_xsum(qs);
        else if (KL_Q32_OFF(fmt))
            kl_q32_seeds(r->seed[b], qs, KL_Q32_OFF(fmt));
        km_half h;
        memcpy(&h, blk, 2);
        r->dx[b] = km_fp16_to_fp32(h);
        if (KL_Q32_HASMIN(fmt)) {
            memcpy(&h, blk + 2, 2);
            r->sx[b] = km_fp16_to_fp32(h);
        }
    }
}

/* One tile at tp (activation blocks b0 = 2j, b1 = 2j + 1 of xr) for the group's 8 rows, the vec_dot order; tv: the
 * tile's 16 t values (b0's 8 rows, then b1's), read back as broadcast loads (no vector ALU op). Each row: one
 * 32-byte load of its nibbles, both blocks' codes, two dots, two fmas (b0's first). */
KL_INLINE void kqr8_tile(kl_f8 *acc, const uint8_t *tp, const float *tv, const kqr8_xrow *xr, int64_t j,
                         const int fmt) {
    /* (without fifth bits h0 / h1 are dead loads of the tile's first bytes, which the compiler drops) */
    const int oh = KQR8_QH(fmt) ? KQR8_OH(fmt) : 0;
    const kl_b32 h0 = kl_b32_load(tp + oh), h1 = kl_b32_load(tp + oh + 32 * KQR8_QH(fmt));
    const kl_b32 x0 = kl_b32_load(xr->q[2 * j]), x1 = kl_b32_load(xr->q[2 * j + 1]);
    const kl_b32 s0 = kl_b32_load(xr->seed[2 * j]), s1 = kl_b32_load(xr->seed[2 * j + 1]);
#pragma GCC unroll 8
    for (int r = 0; r < 8; r++) {
        const kl_b32 p = kl_b32_load(tp + KQR8_ON(fmt) + 32 * r);
        const kl_b32 c0 = KQR8_QH(fmt) ? kl_r8_code(kl_r8_lo(p), h0, r) : kl_r8_lo(p);
        const kl_b32 c1 = KQR8_QH(fmt) ? kl_r8_code(kl_r8_hi(p), h1, r) : kl_r8_hi(p);
        acc[r] = kl_f8_fma(kl_f8_bcast_mem(tv + r), KL_Q32_OFF(fmt) ? kl_r8_dot(c0, x0, s0) : kl_r8_dot0(c0, x0),
                           acc[r]);
        acc[r] = kl_f8_fma(kl_f8_bcast_mem(tv + 8 + r), KL_Q32_OFF(fmt) ? kl_r8_dot(c1, x1, s1) : kl_r8_dot0(c1, x1),
                           acc[r]);
    }
}

/* One group, the vec_dot order: 8 rows at gw (the slice's first tile) over the nt tiles of the slice; first:
 * accumulators (and the min chains) from +0, else from park; last: fold and store the first n rows to y, else park
 * all. wend: the end of the weights (the prefetch stops short of it). */
KL_INLINE void kqr8_group(float *y, int n, const uint8_t *gw, const kqr8_xrow *xr, int64_t nt, int first, int last,
                          float *park, const uint8_t *wend, const int fmt) {
    kl_f8 acc[8], sm = first ? kl_f8_zero() : kl_f8_loadu(park + 64);
    for (int r = 0; r < 8; r++) acc[r] = first ? kl_f8_zero() : kl_f8_loadu(park + 8 * r);
    float tv[16] __attribute__((aligned(32)));
    for (int64_t j = 0; j < nt; j++) {
        const uint8_t *tp = gw + j * KQR8_TILE(fmt);
        if (wend - tp >= KQR8_PF + KQR8_TILE(fmt))
            for (int o = 0; o < KQR8_TILE(fmt); o += 64) kl_prefetch_l2(tp + KQR8_PF + o);
        kl_f8_storeu(tv, kl_f8_mul(kl_f8_load_f16((const uint16_t *)tp), kl_f8_set1(xr->dx[2 * j])));
        kl_f8_storeu(tv + 8, kl_f8_mul(kl_f8_load_f16((const uint16_t *)(tp + 16)), kl_f8_set1(xr->dx[2 * j + 1])));
        if (KL_Q32_HASMIN(fmt)) { /* the 8 min chains, b0 then b1 */
            sm = kl_f8_fma(kl_f8_load_f16((const uint16_t *)(tp + 32)), kl_f8_set1(xr->sx[2 * j]), sm);
            sm = kl_f8_fma(kl_f8_load_f16((const uint16_t *)(tp + 48)), kl_f8_set1(xr->sx[2 * j + 1]), sm);
        }
        kqr8_tile(acc, tp, tv, xr, j, fmt);
    }
    float smv[8] __attribute__((aligned(32)));
    if (KL_Q32_HASMIN(fmt)) kl_f8_storeu(last ? smv : park + 64, sm);
    for (int r = 0; r < 8; r++) {
        if (!last) kl_f8_storeu(park + 8 * r, acc[r]);
        else if (r < n) y[r] = KL_Q32_HASMIN(fmt) ? kl_f8_fold(acc[r]) + smv[r] : kl_f8_fold(acc[r]);
    }
}

#ifdef KL_R8P
/* kqr8_tile on row pairs (the lanes header's KL_R8P: 512-bit vectors): rows r, r + 1 as one kl_b64 load, acc[r / 2]
 * their two rows' chains (low lanes row r); t0 / t1: the tile's 8 rows' t of b0 / b1. Every lane runs kqr8_tile's
 * dots and fmas in its order (b0's fma, then b1's). */
KL_INLINE void kqr8_tile_p(kl_f8r *acc, const uint8_t *tp, kl_f8 t0, kl_f8 t1, const kqr8_xrow *xr, int64_t j,
                           const int fmt) {
    const int oh = KQR8_QH(fmt) ? KQR8_OH(fmt) : 0;
    const kl_b64 h0 = kl_b64_dup(tp + oh), h1 = kl_b64_dup(tp + oh + 32 * KQR8_QH(fmt));
    const kl_b64 x0 = kl_b64_dup(xr->q[2 * j]), x1 = kl_b64_dup(xr->q[2 * j + 1]);
    const kl_b64 s0 = kl_b64_dup(xr->seed[2 * j]), s1 = kl_b64_dup(xr->seed[2 * j + 1]);
#pragma GCC unroll 4
    for (int r = 0; r < 8; r += 2) {
        const kl_b64 p = kl_b64_load(tp + KQR8_ON(fmt) + 32 * r);
        const kl_b64 c0 = KQR8_QH(fmt) ? kl_r8p_code(kl_r8p_lo(p), h0, r) : kl_r8p_lo(p);
        const kl_b64 c1 = KQR8_QH(fmt) ? kl_r8p_code(kl_r8p_hi(p), h1, r) : kl_r8p_hi(p);
        acc[r / 2] = kl_f8r_fma(kl_f8r_pair(t0, r), KL_Q32_OFF(fmt) ? kl_r8p_dot(c0, x0, s0) : kl_r8p_dot0(c0, x0),
                                acc[r / 2]);
        acc[r / 2] = kl_f8r_fma(kl_f8r_pair(t1, r), KL_Q32_OFF(fmt) ? kl_r8p_dot(c1, x1, s1) : kl_r8p_dot0(c1, x1),
                                acc[r / 2]);
    }
}

/* kqr8_group on row pairs (same arguments, park layout and results). */
KL_INLINE void kqr8_group_p(float *y, int n, const uint8_t *gw, const kqr8_xrow *xr, int64_t nt, int first, int last,
                            float *park, const uint8_t *wend, const int fmt) {
    kl_f8r acc[4];
    kl_f8 sm = first ? kl_f8_zero() : kl_f8_loadu(park + 64);
    for (int q = 0; q < 4; q++) acc[q] = first ? kl_f8r_zero() : kl_f8r_loadu(park + 16 * q);
    for (int64_t j = 0; j < nt; j++) {
        const uint8_t *tp = gw + j * KQR8_TILE(fmt);
        if (wend - tp >= KQR8_PF + KQR8_TILE(fmt))
            for (int o = 0; o < KQR8_TILE(fmt); o += 64) kl_prefetch_l2(tp + KQR8_PF + o);
        const kl_f8 t0 = kl_f8_mul(kl_f8_load_f16((const uint16_t *)tp), kl_f8_set1(xr->dx[2 * j]));
        const kl_f8 t1 = kl_f8_mul(kl_f8_load_f16((const uint16_t *)(tp + 16)), kl_f8_set1(xr->dx[2 * j + 1]));
        if (KL_Q32_HASMIN(fmt)) { /* the 8 min chains, b0 then b1 */
            sm = kl_f8_fma(kl_f8_load_f16((const uint16_t *)(tp + 32)), kl_f8_set1(xr->sx[2 * j]), sm);
            sm = kl_f8_fma(kl_f8_load_f16((const uint16_t *)(tp + 48)), kl_f8_set1(xr->sx[2 * j + 1]), sm);
        }
        kqr8_tile_p(acc, tp, t0, t1, xr, j, fmt);
    }
    float smv[8] __attribute__((aligned(32)));
    if (KL_Q32_HASMIN(fmt)) kl_f8_storeu(last ? smv : park + 64, sm);
    for (int q = 0; q < 4; q++) {
        if (!last) {
            kl_f8r_storeu(park + 16 * q, acc[q]);
            continue;
        }
        const float lo = kl_f8_fold(kl_f8r_lo(acc[q])), hi = kl_f8_fold(kl_f8r_hi(acc[q]));
        if (2 * q < n) y[2 * q] = KL_Q32_HASMIN(fmt) ? lo + smv[2 * q] : lo;
        if (2 * q + 1 < n) y[2 * q + 1] = KL_Q32_HASMIN(fmt) ? hi + smv[2 * q + 1] : hi;
    }
}
#define KQR8_GROUP kqr8_group_p
#else
#define KQR8_GROUP kqr8_group
#endif

/* One group, q4_0's repacked order (N % 8 == 0, so the group's 8 rows are all below N): the 8 chains as one kl_f8;
 * first: from +0, else from park; last: stored to y, else parked. Per tile: the 8 rows' isums of both blocks
 * (kl_r8_sums2), each block's 8 t, one fma per block (b0's first). */
KL_INLINE void kqr8_group_x8(float *y, const uint8_t *gw, const kqr8_xrow *xr, int64_t nt, int first, int last,
                             float *park, const uint8_t *wend) {
    const int fmt = KL_Q32_Q4_0;
    kl_f8 acc = first ? kl_f8_zero() : kl_f8_loadu(park);
    for (int64_t j = 0; j < nt; j++) {
        const uint8_t *tp = gw + j * KQR8_TILE(fmt);
        if (wend - tp >= KQR8_PF + KQR8_TILE(fmt))
            for (int o = 0; o < KQR8_TILE(fmt); o += 64) kl_prefetch_l2(tp + KQR8_PF + o);
        kl_f8 s0, s1;
        kl_r8_sums2(tp + KQR8_ON(fmt), xr->q[2 * j], xr->q[2 * j + 1], xr->xo[2 * j], xr->xo[2 * j + 1], &s0, &s1);
        const kl_f8 t0 = kl_f8_mul(kl_f8_load_f16((const uint16_t *)tp), kl_f8_set1(xr->dx[2 * j]));
        const kl_f8 t1 = kl_f8_mul(kl_f8_load_f16((const uint16_t *)(tp + 16)), kl_f8_set1(xr->dx[2 * j + 1]));
        acc = kl_f8_fma(s0, t0, acc);
        acc = kl_f8_fma(s1, t1, acc);
    }
    kl_f8_storeu(last ? y : park, acc);
}

#if defined(KL_R8P) && defined(KL_IV_R8) && KL_FV_LANES == 16
#define KQR8_X8P 1
/* kqr8_group_x8 for two adjacent groups at once (gw, gw + gstride: 16 rows, vector lane c = row c of the first group,
 * 8 + c of the second; one K slice, so from +0 and stored): per tile kl_iv_r8_nib's 16-lane dword transpose of both
 * groups' nibbles, per block eight dots of the 16 rows' nibbles against the activation's dwords seeded with -8 * its
 * quant sum (the exact isum of each row), both groups' 16 t, one fma per block (b0's first): each lane is
 * kqr8_group_x8's chain of its row. */
KL_INLINE void kqr8_group_x8_p(float *y, const uint8_t *gw, int64_t gstride, const kqr8_xrow *xr, int64_t nt,
                               const uint8_t *wend) {
    const int fmt = KL_Q32_Q4_0;
    const int64_t ahead = (KQR8_PF + KQR8_TILE(fmt) - 1) / KQR8_TILE(fmt); /* tiles */
    kl_fv acc = kl_fv_zero();
    for (int64_t j = 0; j < nt; j++) {
        const uint8_t *tp = gw + j * KQR8_TILE(fmt);
        /* both groups' tiles `ahead` on, into the next pair's two groups past the end (each of the two streams must be
         * prefetched from its start: prefetching each group KQR8_PF bytes past the tile left the second group's
         * first bytes unprefetched in every pair, 0.5-0.86x the single-group loop from DRAM) */
        const int64_t pj = j + ahead;
        const int64_t o0 = pj < nt ? pj * KQR8_TILE(fmt) : 2 * gstride + (pj - nt) * KQR8_TILE(fmt); /* from gw */
        if (wend - gw >= o0 + gstride + KQR8_TILE(fmt)) {
            for (int o = 0; o < KQR8_TILE(fmt); o += 64) {
                kl_prefetch_l2(gw + o0 + o);
                kl_prefetch_l2(gw + o0 + gstride + o);
            }
        }
        kl_iv nib[8];
        kl_iv_r8_nib(nib, tp + KQR8_ON(fmt), gstride);
        kl_iv s0 = kl_iv_set1(xr->xo[2 * j]), s1 = kl_iv_set1(xr->xo[2 * j + 1]);
        for (int l = 0; l < 8; l++) {
            s0 = kl_iv_dp4(s0, kl_iv_srl_and8(nib[l], 0, 0x0F), xr->q[2 * j] + 4 * l);
            s1 = kl_iv_dp4(s1, kl_iv_srl_and8(nib[l], 4, 0x0F), xr->q[2 * j + 1] + 4 * l);
        }
        const kl_fv t0 = kl_fv_mul(kl_fv_r8_f16(tp, gstride), kl_fv_set1(xr->dx[2 * j]));
        const kl_fv t1 = kl_fv_mul(kl_fv_r8_f16(tp + 16, gstride), kl_fv_set1(xr->dx[2 * j + 1]));
        acc = kl_fv_fma(kl_fv_cvt_iv(s0), t0, acc);
        acc = kl_fv_fma(kl_fv_cvt_iv(s1), t1, acc);
    }
    kl_fv_storeu(y, acc);
}
#else
#define KQR8_X8P 0
#endif

/* The whole call for one order (x8: q4_0's repacked order, a compile-time constant, so each order is its own loop):
 * thread ith's groups, activation rows one at a time, K in slices of KQR8_KS blocks (one slice: all groups per
 * prepared row; several: chunks of KQR8_NC groups, slices inner). */
KL_INLINE void kqr8_run(float *y, const void *w, const void *x, int64_t M, int64_t N, int64_t K, int ith, int nth,
                        const int fmt, const int x8) {
    const int64_t nb = K / 32, ng = (N + 7) / 8, gstride = nb / 2 * KQR8_TILE(fmt);
    int64_t lo, hi;
    km_part(ng, ith, nth, &lo, &hi);
    const uint8_t *wb = (const uint8_t *)w, *xb = (const uint8_t *)x;
    const uint8_t *wend = wb + ng * gstride;
    kqr8_xrow xr;
    if (nb <= KQR8_KS) {
        for (int64_t m = 0; m < M; m++) {
            kqr8_prep(&xr, xb + m * nb * KL_Q32_XBLK(fmt), nb, fmt, x8);
            for (int64_t g = lo; g < hi; g++) {
                const int n = N - 8 * g >= 8 ? 8 : (int)(N - 8 * g);
#if KQR8_X8P
                if (x8 && g + 1 < hi) { /* two groups per 16-lane vector */
                    kqr8_group_x8_p(y + m * N + 8 * g, wb + g * gstride, gstride, &xr, nb / 2, wend);
                    g++;
                    continue;
                }
#endif
                if (x8)
                    kqr8_group_x8(y + m * N + 8 * g, wb + g * gstride, &xr, nb / 2, 1, 1, NULL, wend);
                else
                    KQR8_GROUP(y + m * N + 8 * g, n, wb + g * gstride, &xr, nb / 2, 1, 1, NULL, wend, fmt);
            }
        }
        return;
    }
    float park[KQR8_NC * 72] __attribute__((aligned(32))); /* KQR8_PARK(fmt) <= 72 floats per group */
    for (int64_t m = 0; m < M; m++) {
        for (int64_t c0 = lo; c0 < hi; c0 += KQR8_NC) {
            const int64_t c1 = hi - c0 > KQR8_NC ? c0 + KQR8_NC : hi;
            for (int64_t k0 = 0; k0 < nb; k0 += KQR8_KS) {
                const int64_t ks = nb - k0 > KQR8_KS ? KQR8_KS : nb - k0;
                kqr8_prep(&xr, xb + (m * nb + k0) * KL_Q32_XBLK(fmt), ks, fmt, x8);
                const int first = k0 == 0, last = k0 + ks == nb;
                for (int64_t g = c0; g < c1; g++) {
                    const int n = N - 8 * g >= 8 ? 8 : (int)(N - 8 * g);
                    const uint8_t *gw = wb + g * gstride + k0 / 2 * KQR8_TILE(fmt);
                    float *pk = park + KQR8_PARK(fmt) * (g - c0);
                    if (x8)
                        kqr8_group_x8(y + m * N + 8 * g, gw, &xr, ks / 2, first, last, pk, wend);
                    else
                        KQR8_GROUP(y + m * N + 8 * g, n, gw, &xr, ks / 2, first, last, pk, wend, fmt);
                }
            }
        }
    }
}

/* The whole linear.token_major.v1 call: q4_0 with N % 8 == 0 takes the repacked order, everything else the vec_dot
 * order (for the other formats the first branch is compiled away). */
static inline void kqr8_linear(float *y, const void *w, const void *x, int64_t M, int64_t N, int64_t K, int ith,
                               int nth, const int fmt) {
#ifdef KQ32G_NG
    if (M >= KQ32G_MIN_M) { /* prefill: linear/q32_gemm_body.h's GEMM on panels unpacked from this layout */
        int64_t lo, hi;
        km_part((N + 7) / 8, ith, nth, &lo, &hi);
        if (lo < hi)
            kq32g_linear(y, (const uint8_t *)w, (const uint8_t *)x, M, N, K / 32, 8 * lo, 8 * hi < N ? 8 * hi : N, fmt,
                         KQR8_X8(fmt, N), 1);
        return;
    }
#endif
    if (KQR8_X8(fmt, N))
        kqr8_run(y, w, x, M, N, K, ith, nth, KL_Q32_Q4_0, 1);
    else
        kqr8_run(y, w, x, M, N, K, ith, nth, fmt, 0);
}

#endif /* KM_Q32_R8_BODY_H */
