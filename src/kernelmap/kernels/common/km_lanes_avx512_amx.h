/* km_lanes_avx512_amx.h — the AVX-512 lanes (km_lanes_avx512.h, compiled with VNNI) plus AMX-INT8 tile sums of
 * whole 32-element blocks, for a family body's GEMM (linear/q32_gemm_body.h, KL_TILE). x86 only; the including
 * file is compiled with -mamx-tile -mamx-int8 and its map variant requires amx_tile and amx_int8.
 *
 * The one tile operation: for one block of 16 activation rows and 16 weight columns, the 16 x 16 exact int32
 * sums C[m][c] = sum over k < 32 of x_m[k] * w_c[k] (x: the rows' q8_0 quants, signed; w: the columns' weights as
 * signed bytes), which is tdpbssd with A = the 16 activation rows' 32 quant bytes (loaded straight from the
 * q8_0 blocks, stride = the activation row) and B = the block's weights dword-transposed, 8 rows of 64 bytes:
 * B[k][4c + i] = w_c[4k + i] (the layout a kq32g_blk's eight 16-column code vectors already have). Each sum is a
 * whole block's: tiles serve the contracts whose float step takes one integer per block (q4_0's repacked order);
 * the 8-lane ggml orders need 8 sums of 4 products per block, which caps a tile at 1024 useful products and
 * measured slower than VNNI (linear/q32_amx_ggml_body.h).
 *
 * The OS must grant the tile state (Linux: arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA), asked once per
 * process; the generated program asks at start-up and refuses to run if refused). kl_tile_begin() returns 0
 * when the state is refused: the body then takes its VNNI schedule, whose bits are the same.
 */
#ifndef KM_LANES_AVX512_AMX_H
#define KM_LANES_AVX512_AMX_H

#include <stdlib.h>
#include <sys/syscall.h>

#include "km_lanes_avx512.h"

#define KL_TILE 1

long syscall(long number, ...); /* <unistd.h> declares it only under _GNU_SOURCE; the sources build as C11 */

/* 1 once the OS has granted this process the tile state (asked once; the answer is cached). */
static int kl_tile_granted(void) {
    static int state; /* 0 not asked, 1 granted, -1 refused */
    int s = __atomic_load_n(&state, __ATOMIC_ACQUIRE);
    if (s == 0) {
        s = syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XFEATURE_XTILEDATA */) == 0 ? 1 : -1;
        __atomic_store_n(&state, s, __ATOMIC_RELEASE);
    }
    return s > 0;
}

/* Tile configuration (palette 1): tiles 0, 1 = C (16 x 16 int32), 2, 3 = A (16 rows x 32 bytes),
 * 4, 5 = B (8 rows x 64 bytes) (3 unused). */
typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} __attribute__((packed)) kl_tilecfg;

/* The configuration is a constant object: ldtilecfg reads it from memory, and a configuration built in a local
 * just before the instruction can have its stores dropped by the optimizer (seen with gcc 12 -O2 in
 * benchmarks/amx_tile_rate.c: ldtilecfg faulted on an uninitialized block). */
static const kl_tilecfg kl_tile_config __attribute__((aligned(64))) = {
    .palette = 1,
    .colsb = {64, 64, 32, 32, 64, 64},
    .rows = {16, 16, 16, 16, 8, 8},
};

/* Configure this thread's tiles; 0 (nothing configured) when the OS refused the tile state. */
static inline int kl_tile_begin(void) {
    if (!kl_tile_granted()) return 0;
    _tile_loadconfig(&kl_tile_config);
    return 1;
}

static inline void kl_tile_end(void) { _tile_release(); }

/* One block: C of the activation rows at a (the block's quants, row stride astride) against the weights at b0
 * (512 bytes, B layout), stored to c0 (16 x 16 int32, row m at c0 + 16 m); and, when c1 is not NULL, against b1
 * into c1 (a second column group sharing the rows' tile). */
KL_INLINE void kl_tile_sums(int32_t *c0, int32_t *c1, const uint8_t *a, int64_t astride, const int8_t *b0,
                            const int8_t *b1) {
    _tile_zero(0);
    _tile_loadd(2, a, astride);
    _tile_loadd(4, b0, 64);
    _tile_dpbssd(0, 2, 4);
    _tile_stored(0, c0, 64);
    if (c1) {
        _tile_zero(1);
        _tile_loadd(5, b1, 64);
        _tile_dpbssd(1, 2, 5);
        _tile_stored(1, c1, 64);
    }
}

/* Bytes minus off, 64 at a time (a code vector to the signed weights tdpbssd takes; wraps mod 256). */
KL_INLINE kl_iv kl_iv_sub8(kl_iv v, int off) { return _mm512_sub_epi8(v, _mm512_set1_epi8((char)off)); }

/* The int32 sums of row m as f32 (exact: |sum| <= 32 * 128 * 128 < 2^24). */
KL_INLINE kl_fv kl_fv_from_i32(const int32_t *p) { return _mm512_cvtepi32_ps(_mm512_load_si512((const void *)p)); }

#endif /* KM_LANES_AVX512_AMX_H */
