/* linear/q32_r8_body.h — the decode GEMV (M = 1 activation row; any M runs correctly) of contract
 * linear.q5_0.q8_0.ggml.v1 on q5_0 weights in the repacked layout "q32_r8" (weights/repack.py packs it),
 * written once; every x86 variant (AVX2, AVX-512, AVX-512 VNNI) is an instantiation of it.
 *
 * Layout "q32_r8" (K a multiple of 64, nb = K / 32 blocks per row): rows in groups of 8 (ceil(N / 8) groups;
 * the last group's rows >= N are zero bytes), group g at g * (nb / 2) * 352 bytes, nb / 2 tiles of 352 bytes,
 * tile j holding blocks b0 = 2j and b1 = 2j + 1 of the group's 8 rows:
 *   [0, 16)    the 8 rows' d of b0 (fp16, row order)      [16, 32)  the same for b1
 *   [32, 64)   H0: byte i bit r = the fifth bit of value i of row r, block b0   [64, 96)  H1: the same, b1
 *   [96, 352)  row r's 32 bytes at 96 + 32 r: byte i = (b0's code i & 15) | (b1's code i & 15) << 4
 * So a row's two blocks are one 32-byte load (the low / high nibbles are value i of b0 / b1, already in the
 * activation's byte order: no 16 -> 32 byte spread), a group's scales are two 16-byte loads (vcvtph2ps gives
 * the 8 rows' d: no per-row gather) and row r's fifth bits are its own bit r of H0 / H1: one shift by the
 * compile-time 4 - r puts every byte's bit r on bit 4 (bits that crossed bytes land elsewhere and the & 0x10
 * drops them). linear/q32_ggml_body.h's AVX2 decode on the plain layout spent ~30% of its time building the
 * fifth bits (broadcast, shuffle, and, compare per block) and ~13% gathering a row's f16 scales.
 *
 * Numerics (exactly linear/q5_0_q8_0_ggml_ref.c on the plain layout, i.e. q5_0_q8_0_ggml_r8_ref.c): per output
 * (m, n), eight f32 lanes acc[l] = +0; for the blocks b = 0, 1, ... in order, lane[l] = the exact int32 sum of
 * the four products (code - 16) * xq at 4l..4l+3, t = f32(fp16(w.d) * fp16(x.d)), acc[l] = fma(t, (float)lane[l],
 * acc[l]); y = kl_f8_fold(acc). The lanes are vpmaddubsw(code, xq) + vpmaddwd(1) (or one vpdpbusd with VNNI:
 * int16 pairs <= 2 * 31 * 128, so both are exact) plus km_lanes_x86.h's seed 0x4B400000 - 16 * xs4 (xs4 = the
 * lane's four activation quants summed), whose float minus 1.5 * 2^23 is the lane's exact float. A tile runs
 * block b0's fma then b1's for every row, tiles in order: each row's chain is the ref's; rows, groups, threads
 * and K slices never split one chain.
 *
 * Schedule (the instantiating file defines these before including this header):
 *   KQR8_PF     software prefetch distance in bytes (to L2) ahead of the tile being read. A thread's groups are
 *               one contiguous byte range read forward (a group's 8 rows are adjacent), so the lines of the range
 *               KQR8_PF ahead of each tile are prefetched (across group ends; never past the tensor). AVX2, one
 *               thread, N = 2048, K = 2048 streaming from DRAM (34 weight copies, 98 MB): no prefetch 20.0 GMAC/s,
 *               1 KB 23.6, 2 KB 24.8, 3-5 KB 25.9-26.0, 8 KB 25.0, 16 KB 24.1 (hot, the same shape: ~28), Zen 3
 *   KQR8_KS     blocks per K slice (even): the prepared activation slice (68 bytes per block) lives on the stack;
 *               longer rows run slice by slice with the accumulators parked between slices (and prefetch less
 *               usefully: the next tile of a group is a slice away)
 *   KQR8_NC     groups per chunk when a row has several slices (park: 256 bytes per group)
 * The fifth bits and the dot are the lanes header's kl_r8_code and kl_r8_dot (km_lanes_x86.h): on AVX-512 BW
 * row r's fifth bits are a mask register (vptestmb against 1 << r) and a masked byte add of 16, on AVX2 the shift and
 * & 0x10 above or-ed into the nibbles; with AVX-512 VNNI a lane's int32 is one vpdpbusd onto the seed, else
 * vpmaddubsw, vpmaddwd and an add.
 * AVX2 cost per tile (8 rows x 2 blocks): ~154 vector ALU ops (32 integer multiplies, 16 fmas, 22 shifts, 64
 * logic / integer adds, 16 float subtracts, 4 for the t) and ~50 loads; q32_ggml_body.h's decode spends ~230
 * vector ops (and scalar work packing the scales) on the same 16 row-blocks of the plain layout. Hot
 * (L2 / L3 resident), one thread, Zen 3 at ~3.2 GHz: 26-29 GMAC/s for N x K = 2048 x 640, 640 x 2048, 1152 x 640,
 * 2048 x 2048 (q32_ggml_body.h on the plain layout: 16-18), i.e. ~58 cycles per tile. Measured and dropped:
 * 4 rows per pass over K instead of 8 (-9%: the t, the H loads and the loop are per pass), 2 rows (-23%); fifth
 * bits by and + vpminub (bit r kept, clamped to 16) instead of the shift (-13%: seven more live constants); the
 * activation operands and the dot's constants forced to memory operands (no spills left, but -9%: loads); the
 * eight folds as one transposed vector tree (-7% to 0 between builds: code placement); prefetch off when hot (no
 * gain). The eight accumulators, the constants, H0 / H1 and the activation operands exceed AVX2's 16 ymm: gcc
 * parks 2-6 accumulators on the stack (fma from memory, store), which measured cheaper than the alternatives.
 * Partition: groups of 8 output columns (km_part over ceil(N / 8)); a thread writes y only for its groups' rows
 * below N; no output depends on M, the slices or (ith, nth).
 * The instantiating file defines the entry point (linear.token_major.v1 ABI) as a call of kqr8_linear.
 */
#ifndef KM_Q32_R8_BODY_H
#define KM_Q32_R8_BODY_H

#include "km_lanes.h"

#define KQR8_TILE 352 /* bytes per tile: 8 rows x 2 blocks x 22 bytes */
#define KQR8_XBLK 34  /* bytes per q8_0 activation block */

#if (KQR8_KS) % 2 != 0
#error "KQR8_KS must be even (a tile is two blocks)"
#endif

#ifndef KL_R8
#error "linear/q32_r8_body.h needs the q32_r8 lanes ops (KL_R8, km_lanes.h)"
#endif

/* One activation row's slice of blocks, prepared once per call (per chunk when sliced): each block's 32 quants,
 * its seed, its d as f32. 32-byte aligned rows: the dots read them as memory operands. */
typedef struct {
    int8_t q[KQR8_KS][32] __attribute__((aligned(32)));
    int32_t seed[KQR8_KS][8] __attribute__((aligned(32)));
    float dx[KQR8_KS];
} kqr8_xrow;

/* x: the slice's first activation block; ks blocks. */
KL_INLINE void kqr8_prep(kqr8_xrow *r, const uint8_t *x, int64_t ks) {
    for (int64_t b = 0; b < ks; b++) {
        const uint8_t *blk = x + b * KQR8_XBLK;
        memcpy(r->q[b], blk + 2, 32);
        kl_q32_seeds(r->seed[b], (const int8_t *)(blk + 2), 16);
        km_half h;
        memcpy(&h, blk, 2);
        r->dx[b] = km_fp16_to_fp32(h);
    }
}

/* One tile at tp (activation blocks b0 = 2j, b1 = 2j + 1 of xr) for the group's 8 rows; tv: the tile's 16 t values
 * (b0's 8 rows, then b1's), read back as broadcast loads (no vector ALU op). Each row: one 32-byte load of its
 * nibbles, both blocks' codes, two dots, two fmas (b0's first). */
KL_INLINE void kqr8_tile(kl_f8 *acc, const uint8_t *tp, const float *tv, const kqr8_xrow *xr, int64_t j) {
    const kl_b32 h0 = kl_b32_load(tp + 32), h1 = kl_b32_load(tp + 64);
    const kl_b32 x0 = kl_b32_load(xr->q[2 * j]), x1 = kl_b32_load(xr->q[2 * j + 1]);
    const kl_b32 s0 = kl_b32_load(xr->seed[2 * j]), s1 = kl_b32_load(xr->seed[2 * j + 1]);
#pragma GCC unroll 8
    for (int r = 0; r < 8; r++) {
        const kl_b32 p = kl_b32_load(tp + 96 + 32 * r);
        const kl_b32 c0 = kl_r8_code(kl_r8_lo(p), h0, r);
        const kl_b32 c1 = kl_r8_code(kl_r8_hi(p), h1, r);
        acc[r] = kl_f8_fma(kl_f8_bcast_mem(tv + r), kl_r8_dot(c0, x0, s0), acc[r]);
        acc[r] = kl_f8_fma(kl_f8_bcast_mem(tv + 8 + r), kl_r8_dot(c1, x1, s1), acc[r]);
    }
}

/* One group: 8 rows at gw (the slice's first tile) over the nt tiles of the slice; first: accumulators from +0,
 * else from park; last: fold and store the first n rows to y, else park all 8. wend: the end of the weights
 * (the prefetch stops short of it). */
KL_INLINE void kqr8_group(float *y, int n, const uint8_t *gw, const kqr8_xrow *xr, int64_t nt, int first, int last,
                          float *park, const uint8_t *wend) {
    kl_f8 acc[8];
    for (int r = 0; r < 8; r++) acc[r] = first ? kl_f8_zero() : kl_f8_loadu(park + 8 * r);
    float tv[16] __attribute__((aligned(32)));
    for (int64_t j = 0; j < nt; j++) {
        const uint8_t *tp = gw + j * KQR8_TILE;
        if (wend - tp >= KQR8_PF + KQR8_TILE)
            for (int o = 0; o < KQR8_TILE; o += 64) kl_prefetch_l2(tp + KQR8_PF + o);
        kl_f8_storeu(tv, kl_f8_mul(kl_f8_load_f16((const uint16_t *)tp), kl_f8_set1(xr->dx[2 * j])));
        kl_f8_storeu(tv + 8, kl_f8_mul(kl_f8_load_f16((const uint16_t *)(tp + 16)), kl_f8_set1(xr->dx[2 * j + 1])));
        kqr8_tile(acc, tp, tv, xr, j);
    }
    for (int r = 0; r < 8; r++) {
        if (!last) kl_f8_storeu(park + 8 * r, acc[r]);
        else if (r < n) y[r] = kl_f8_fold(acc[r]);
    }
}

/* The whole linear.token_major.v1 call: thread ith's groups, activation rows one at a time, K in slices of
 * KQR8_KS blocks (one slice: all groups per prepared row; several: chunks of KQR8_NC groups, slices inner). */
static inline void kqr8_linear(float *y, const void *w, const void *x, int64_t M, int64_t N, int64_t K, int ith,
                               int nth) {
    const int64_t nb = K / 32, ng = (N + 7) / 8, gstride = nb / 2 * KQR8_TILE;
    int64_t lo, hi;
    km_part(ng, ith, nth, &lo, &hi);
    const uint8_t *wb = (const uint8_t *)w, *xb = (const uint8_t *)x;
    const uint8_t *wend = wb + ng * gstride;
    kqr8_xrow xr;
    if (nb <= KQR8_KS) {
        for (int64_t m = 0; m < M; m++) {
            kqr8_prep(&xr, xb + m * nb * KQR8_XBLK, nb);
            for (int64_t g = lo; g < hi; g++) {
                const int n = N - 8 * g >= 8 ? 8 : (int)(N - 8 * g);
                kqr8_group(y + m * N + 8 * g, n, wb + g * gstride, &xr, nb / 2, 1, 1, NULL, wend);
            }
        }
        return;
    }
    float park[KQR8_NC * 64] __attribute__((aligned(32)));
    for (int64_t m = 0; m < M; m++) {
        for (int64_t c0 = lo; c0 < hi; c0 += KQR8_NC) {
            const int64_t c1 = hi - c0 > KQR8_NC ? c0 + KQR8_NC : hi;
            for (int64_t k0 = 0; k0 < nb; k0 += KQR8_KS) {
                const int64_t ks = nb - k0 > KQR8_KS ? KQR8_KS : nb - k0;
                kqr8_prep(&xr, xb + (m * nb + k0) * KQR8_XBLK, ks);
                const int first = k0 == 0, last = k0 + ks == nb;
                for (int64_t g = c0; g < c1; g++) {
                    const int n = N - 8 * g >= 8 ? 8 : (int)(N - 8 * g);
                    kqr8_group(y + m * N + 8 * g, n, wb + g * gstride + k0 / 2 * KQR8_TILE, &xr, ks / 2, first, last,
                               park + 64 * (g - c0), wend);
                }
            }
        }
    }
}

#endif /* KM_Q32_R8_BODY_H */
