/* linear/q32_amx_ggml_body.h — the AMX-INT8 prefill of linear.q8_0.q8_0.ggml.v1 (x86 only, one class: a
 * documented single-class point, not a lanes family body; docs/LKB.md, FORKS.md).
 *
 * Numerics: exactly linear/q8_0_q8_0_ggml_ref.c (llama.cpp's x86 vec_dot_q8_0_q8_0 order). Per output
 * (m, n) eight f32 lanes from +0; per block b in order lane[l] = the exact int32 sum of the 4 products at
 * 4l..4l+3, t = f32(fp16(w.d) * fp16(x.d)), acc[l] = fma(t, (float)lane[l], acc[l]); then the fold
 * l+4, 0+2 / 1+3, 0+1 (kl_f8x2_fold). The tiles only produce the lane sums, which are exact integers
 * (|lane| <= 4 * 128 * 127 < 2^24, so the int32 -> f32 conversion is exact too); every float step is the
 * contract's single IEEE op in the contract's order, so the bytes equal the ref's.
 *
 * Why lane sums and not block sums: the contract keeps one f32 chain per 4-byte lane, so a tile must give
 * 8 int32 per (n, m, block). The layout that does it without repacking weights:
 *   A (16 x 32 bytes) = 16 weight rows' block b, loaded straight from the ggml blocks (stride = the row);
 *   B (8 x 64 bytes)  = an activation row pair's block b as a dword-diagonal: B[k][4j + i] = x_mm[4k + i]
 *                       when j = 2k + mm (mm = 0, 1), else 0;
 *   C (16 x 16 int32) = tdpbssd: C[r][2l + mm] = lane l of (weight row r, activation row mm).
 * A C row is a kl_f8x2 row pair (lanes interleaved, as km_lanes_avx512.h lays them), so the float steps
 * are one convert + mul + fma per weight row and block. The diagonal B wastes 7/8 of the tile's products
 * (the 8-lane contract caps a tile at 1024 useful MACs).
 *
 * Speed, measured (2026-12-05, the 2-vCPU Intel Xeon with AMX-INT8; `kernelmap bench --filter
 * linear_q8_0_q8_0_ggml --variant avx512vnni,amx --rows 128 --threads 1,2`, two runs): this variant 24-25 /
 * 38-49 GMAC/s at 1 / 2 threads, the avx512vnni variant's column-lane GEMM (linear/q32_gemm_body.h) 81-96 /
 * 116-142. It is slower, which is why its priority (25) is below avx512vnni's (30): static priority never picks
 * it over VNNI. The reason is the contract more than the code: one block of tile work (zero, load A and B,
 * tdpbssd, store C) took 13-19 ns there (benchmarks/amx_tile_rate.c; one tdpbssd 6-14 ns whatever its K, 4 to
 * 64 bytes, as the host's load moved), so 1024 useful products per block cap any AMX schedule of an 8-lane
 * ggml contract at ~55-80 GMAC/s per core, below q8_0's VNNI lane-step floor there (107 GMAC/s per core,
 * `kernelmap bench --prefill`). Another tiling of these contracts (activation rows x 4 bytes of one lane
 * against 16 columns, K = 4) has the same 1024-product cap. Contracts whose float step takes a whole block's
 * sum (q4_0's repacked order) fill the tile (8192 products): km_lanes_avx512_amx.h and the amx variants of
 * linear_q4_0_q8_0_ggml_r8 and linear_q4_0_q8_0_ggml (r8: 1.0-1.6x its avx512vnni variant at M = 128). Kept as the tested 8-lane AMX point (the kernel
 * tests compare it with the ref on a host with AMX; tests/codegen/test_amx_startup.py checks the tile grant).
 *
 * The OS must grant the tile state first (Linux: arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA));
 * the generated program asks at start-up and refuses to run if the OS says no; the kernel asks again on
 * its first call (a library called directly) and, refused, computes with the VNNI body (same bits).
 *
 * Schedule (the instantiating file defines these, plus the q32_ggml_body.h macros of the fallback):
 *   KQA_MIN_M  fewest activation rows that take the tile path (fewer: kq32_linear)
 *   KQA_PAIRS  activation row pairs per chunk (their diagonal blocks stay in L2 across weight rows)
 * Partition: output columns n (km_part over N), as the ref.
 */
#ifndef KM_Q32_AMX_GGML_BODY_H
#define KM_Q32_AMX_GGML_BODY_H

#include <immintrin.h>
#include <stdlib.h>

#include "km_lanes_avx512_amx.h" /* kl_tile_granted */
#include "q32_ggml_body.h"

#define KQA_MAXNB 512         /* blocks per row on the tile path (K <= 16384); longer rows: kq32_linear */

/* The tile configuration (palette 1): tile 0 = C (16 rows x 64 bytes), 1 = A (16 x 32), 2 = B (8 x 64); a
 * constant object, as km_lanes_avx512_amx.h's (a local's stores can be dropped before ldtilecfg reads them). */
static const kl_tilecfg kqa_tile_config __attribute__((aligned(64))) = {
    .palette = 1,
    .colsb = {64, 32, 64},
    .rows = {16, 16, 8},
};

static void kqa_config(void) { _tile_loadconfig(&kqa_tile_config); }

/* Activation rows m0 and m1 (m1 == m0 for an odd last row), blocks [0, nb): per block the 8 x 64-byte
 * diagonal B at bq (512 bytes a block) and the pair (fp16(x_m0.d), fp16(x_m1.d)) at dx. */
static inline void kqa_prep_pair(int8_t *bq, float *dx, const km_block_q8_0 *x0, const km_block_q8_0 *x1, int64_t nb) {
    const __m512i il = _mm512_set_epi32(15, 7, 14, 6, 13, 5, 12, 4, 11, 3, 10, 2, 9, 1, 8, 0);
    for (int64_t b = 0; b < nb; b++) {
        const __m512i q = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)x0[b].qs)),
                                             _mm256_loadu_si256((const __m256i *)x1[b].qs), 1);
        const __m512i qi = _mm512_permutexvar_epi32(il, q); /* dwords x0[0] x1[0] x0[1] x1[1] ... */
        for (int k = 0; k < 8; k++)
            _mm512_store_si512((__m512i *)(bq + b * 512 + k * 64), _mm512_maskz_mov_epi32((__mmask16)(3u << (2 * k)), qi));
        dx[2 * b] = km_fp16_to_fp32(x0[b].d);
        dx[2 * b + 1] = km_fp16_to_fp32(x1[b].d);
    }
}

/* 16 weight rows at a (row stride wrow) against one prepared activation pair: the lane chains of
 * every block in order, folded and stored to y0[r] / y1[r] for r < nr (y1 NULL: the pair's second row
 * repeats the first and is not written). dw: the rows' fp16(w.d) as f32, 16 per block. */
static inline void kqa_rows16(float *y0, float *y1, int nr, const uint8_t *a, int64_t wrow, const float *dw,
                              const int8_t *bq, const float *dx, int64_t nb, int32_t *cbuf) {
    __m512 acc[16];
    for (int r = 0; r < 16; r++) acc[r] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        _tile_zero(0);
        _tile_loadd(1, a + b * (int64_t)sizeof(km_block_q8_0) + 2, wrow);
        _tile_loadd(2, bq + b * 512, 64);
        _tile_dpbssd(0, 1, 2);
        _tile_stored(0, cbuf, 64);
        const __m512 dxv = _mm512_castpd_ps(_mm512_broadcastsd_pd(_mm_load_sd((const double *)(dx + 2 * b))));
        for (int r = 0; r < 16; r++) {
            const __m512 t = _mm512_mul_ps(_mm512_set1_ps(dw[b * 16 + r]), dxv);
            acc[r] = _mm512_fmadd_ps(t, _mm512_cvtepi32_ps(_mm512_loadu_si512((const __m512i *)(cbuf + 16 * r))), acc[r]);
        }
    }
    float u[16], v[16];
    for (int r = 0; r < 16; r++) kl_f8x2_fold(acc[r], &u[r], &v[r]); /* all 16: acc stays in registers */
    for (int r = 0; r < nr; r++) {
        y0[r] = u[r];
        if (y1) y1[r] = v[r];
    }
}

/* The whole call: columns [lo, hi) of thread ith in groups of 16 (a short last group is staged with its
 * last row repeated), activation rows in chunks of KQA_PAIRS pairs. Returns 0 when it could not run (no
 * tile grant, K too long, no memory): the caller then takes the VNNI body. */
static int kqa_linear_q8_0(float *y, const void *w, const void *x, int64_t M, int64_t N, int64_t K, int ith, int nth) {
    const int64_t nb = K / KM_QK8_0;
    if (nb > KQA_MAXNB || !kl_tile_granted()) return 0;
    int64_t lo, hi;
    km_part(N, ith, nth, &lo, &hi);
    if (lo >= hi) return 1;
    const int64_t wrow = nb * (int64_t)sizeof(km_block_q8_0);
    const int64_t pairs = (M + 1) / 2, cp = pairs < KQA_PAIRS ? pairs : KQA_PAIRS;
    const size_t bq_bytes = (size_t)(cp * nb * 512), dx_bytes = (size_t)((cp * nb * 2 * 4 + 63) & ~(int64_t)63);
    const size_t dw_bytes = (size_t)(nb * 16 * 4), st_bytes = (size_t)((16 * wrow + 63) & ~(int64_t)63);
    uint8_t *mem = aligned_alloc(64, bq_bytes + dx_bytes + dw_bytes + st_bytes + 1024);
    if (!mem) return 0;
    int8_t *bq = (int8_t *)mem;
    float *dx = (float *)(mem + bq_bytes), *dw = (float *)(mem + bq_bytes + dx_bytes);
    uint8_t *stage = mem + bq_bytes + dx_bytes + dw_bytes; /* every part a multiple of 64 bytes */
    int32_t *cbuf = (int32_t *)(stage + st_bytes);
    const km_block_q8_0 *xb = (const km_block_q8_0 *)x;
    const uint8_t *wb = (const uint8_t *)w;
    kqa_config();
    for (int64_t p0 = 0; p0 < pairs; p0 += cp) {
        const int64_t np = pairs - p0 < cp ? pairs - p0 : cp;
        for (int64_t p = 0; p < np; p++) {
            const int64_t m0 = 2 * (p0 + p), m1 = m0 + 1 < M ? m0 + 1 : m0;
            kqa_prep_pair(bq + p * nb * 512, dx + p * nb * 2, xb + m0 * nb, xb + m1 * nb, nb);
        }
        for (int64_t n0 = lo; n0 < hi; n0 += 16) {
            const int nr = hi - n0 >= 16 ? 16 : (int)(hi - n0);
            const uint8_t *a = wb + n0 * wrow;
            if (nr < 16) { /* the rows past the range repeat the last one (computed, never written) */
                for (int r = 0; r < 16; r++) memcpy(stage + r * wrow, wb + (n0 + (r < nr ? r : nr - 1)) * wrow, (size_t)wrow);
                a = stage;
            }
            for (int64_t b = 0; b < nb; b++)
                for (int r = 0; r < 16; r++) {
                    km_half h;
                    memcpy(&h, a + r * wrow + b * (int64_t)sizeof(km_block_q8_0), 2);
                    dw[b * 16 + r] = km_fp16_to_fp32(h);
                }
            for (int64_t p = 0; p < np; p++) {
                const int64_t m0 = 2 * (p0 + p);
                float *y1 = m0 + 1 < M ? y + (m0 + 1) * N + n0 : NULL;
                kqa_rows16(y + m0 * N + n0, y1, nr, a, wrow, dw, bq + p * nb * 512, dx + p * nb * 2, nb, cbuf);
            }
        }
    }
    _tile_release();
    free(mem);
    return 1;
}

#endif /* KM_Q32_AMX_GGML_BODY_H */
