/* benchmarks/amx_tile_rate.c — how long one AMX-INT8 tile instruction takes on this host.
 *
 * Why: an AMX schedule of a ggml contract is bound by its tile instructions, and which contracts AMX can speed
 * up follows from two numbers: the time of one tdpbssd (does it depend on K, the bytes per row of A?) and of the
 * loads and stores around it. linear/q32_amx_ggml_body.h (8-lane contracts: 1024 useful products per tdpbssd)
 * and km_lanes_avx512_amx.h (whole-block sums: 8192) cite this. A development tool, not a speed claim.
 *
 *   gcc -O2 -mamx-tile -mamx-int8 benchmarks/amx_tile_rate.c -o /tmp/amx_tile_rate && /tmp/amx_tile_rate
 *
 * Prints ns per instruction: tdpbssd with K = 4..64 bytes in 6 independent accumulators, tile loads (A rows
 * strided as q8_0 activation rows, B contiguous), tile stores, and one whole block of the repacked-order GEMM
 * (zero, two loads, tdpbssd, store).
 */
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} __attribute__((packed)) tilecfg;

static int8_t A[16 * 680] __attribute__((aligned(64))), B[16 * 64] __attribute__((aligned(64)));
static int32_t C[2][256] __attribute__((aligned(64)));

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static tilecfg cfg[5] __attribute__((aligned(64))); /* one per K; static: see config() */

/* tiles 0-5: C; 6: A (16 x k bytes); 7: B (k / 4 x 64). The configuration lives in a static object: built in a
 * local just before ldtilecfg, gcc 12 -O2 dropped its stores (the intrinsic's read of it is not seen) and
 * ldtilecfg faulted. */
static void config(int i, int k) {
    tilecfg *c = &cfg[i];
    c->palette = 1;
    for (int t = 0; t < 6; t++) c->rows[t] = 16, c->colsb[t] = 64;
    c->rows[6] = 16, c->colsb[6] = (uint16_t)k;
    c->rows[7] = (uint8_t)(k / 4), c->colsb[7] = 64;
    __asm__ __volatile__("" : : "r"(c) : "memory"); /* the stores happen before ldtilecfg reads them */
    _tile_loadconfig(c);
}

int main(void) {
    if (syscall(SYS_arch_prctl, 0x1023, 18) != 0) {
        puts("the OS refused the AMX tile state (arch_prctl ARCH_REQ_XCOMP_PERM)");
        return 1;
    }
    const long n = 1000000;
    static const int ks[] = {4, 8, 16, 32, 64};
    for (int i = 0; i < 5; i++) {
        config(i, ks[i]);
        _tile_loadd(6, A, 64);
        _tile_loadd(7, B, 64);
        _tile_zero(0); /* the tile intrinsics take immediates, hence no loop */
        _tile_zero(1);
        _tile_zero(2);
        _tile_zero(3);
        _tile_zero(4);
        _tile_zero(5);
        const double t0 = now();
        for (long j = 0; j < n; j++) {
            _tile_dpbssd(0, 6, 7);
            _tile_dpbssd(1, 6, 7);
            _tile_dpbssd(2, 6, 7);
            _tile_dpbssd(3, 6, 7);
            _tile_dpbssd(4, 6, 7);
            _tile_dpbssd(5, 6, 7);
        }
        const double dt = now() - t0;
        printf("tdpbssd, K = %2d bytes: %6.2f ns (%7.1f G products/s if all are useful)\n", ks[i], dt / (6.0 * n) * 1e9,
               6.0 * n * 16 * 16 * ks[i] / dt * 1e-9);
        _tile_release();
    }
    config(3, 32);
    double t0 = now();
    for (long j = 0; j < n; j++) _tile_loadd(6, A + (j & 7) * 34, 680);
    printf("tileloadd A (16 rows x 32 bytes, stride 680): %6.2f ns\n", (now() - t0) / n * 1e9);
    t0 = now();
    for (long j = 0; j < n; j++) _tile_loadd(7, B, 64);
    printf("tileloadd B (8 rows x 64 bytes, contiguous):  %6.2f ns\n", (now() - t0) / n * 1e9);
    t0 = now();
    for (long j = 0; j < n; j++) _tile_stored(0, C[j & 1], 64);
    printf("tilestored C (16 x 64 bytes):                 %6.2f ns\n", (now() - t0) / n * 1e9);
    t0 = now();
    for (long j = 0; j < n; j++) {
        _tile_zero(0);
        _tile_loadd(6, A + (j & 7) * 34, 680);
        _tile_loadd(7, B, 64);
        _tile_dpbssd(0, 6, 7);
        _tile_stored(0, C[j & 1], 64);
    }
    printf("one block (zero, load A and B, tdpbssd, store): %6.2f ns = %.1f G products/s\n", (now() - t0) / n * 1e9,
           8192.0 * n / (now() - t0) * 1e-9);
    _tile_release();
    return 0;
}
