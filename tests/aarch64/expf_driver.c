/* expf_driver.c — run the lanes' vector expf (kl_fv_expf), or with -DKM_EXPF_DRIVER_SCALAR=1 the scalar km_expf
 * (km_expf.h), over float bit ranges; count where it differs from this machine's expf.
 *
 * Contract checked: kl_fv_expf and km_expf are x86-64 glibc's expf bit for bit (its FMA build's operations), on
 * every ISA (km_expf.h). The test (test_aarch64_expf.py) builds this file natively on x86_64 (the AVX-512
 * lanes when the host has them, else AVX2) and cross-built for aarch64 (the NEON lanes, run under qemu-aarch64),
 * and compares: each build's results with its own machine's expf (the count below), and the two builds' results
 * with each other (the hash below: the same bits on every CPU).
 *
 * The lanes header is picked from the compiler's target macros (km_lanes.h itself includes none): __aarch64__
 * -> km_lanes_neon.h, __AVX512F__ -> km_lanes_avx512.h, __AVX2__ -> km_lanes_avx2.h. Build with the kernels'
 * flags (-ffp-contract=off) and -I src/kernelmap/kernels/common; link -lm.
 *
 * Usage:
 *   expf_driver LO:N ...          the ranges of float bit patterns [LO, LO + N) (LO + N <= 2^32; C integer
 *                                 syntax, so 0x7f800000:65536 works); with no arguments, one "LO N" or "LO:N"
 *                                 per line on stdin
 *   expf_driver --values LO N     one line per input: "x got want" (hex bits of the input, of kl_fv_expf, of expf)
 * Output per range, one line: "lo n bad first got want hash libm_hash" — lo and n as given (hex / decimal), bad
 * the number of inputs whose kl_fv_expf result differs bitwise from expf, first the first such input with got
 * (kl_fv_expf) and want (expf) its two results (all three 0 when bad is 0), hash the 64-bit FNV-1a of the
 * little-endian bytes of every kl_fv_expf result in input order, libm_hash the same of expf's results (hex).
 * The range is walked in vectors of KL_FV_LANES inputs; lanes past the end of a range repeat its first input
 * of that vector and are not counted. Exit 0, or 2 with one line on stderr (bad arguments).
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if KM_EXPF_DRIVER_SCALAR
#include "km_expf.h" /* the refs' build: no lanes header, no ISA flags */
#define KL_FV_LANES 8
#else
#include "km_lanes.h"
#if defined(__aarch64__)
#include "km_lanes_neon.h"
#elif defined(__AVX512F__)
#include "km_lanes_avx512.h"
#elif defined(__AVX2__)
#include "km_lanes_avx2.h"
#else
#error "expf_driver.c: no lanes header for this target (aarch64, or x86_64 with -mavx2 / -mavx512f)"
#endif
#endif

#define FNV_OFFSET 0xcbf29ce484222325ULL
#define FNV_PRIME 0x100000001b3ULL

typedef struct {
    uint64_t bad;
    uint32_t first, got, want;
    uint64_t hash, libm_hash;
} range_result;

static uint64_t fnv1a32(uint64_t h, uint32_t bits) {
    for (int b = 0; b < 4; b++) {
        h ^= (bits >> (8 * b)) & 0xffu;
        h *= FNV_PRIME;
    }
    return h;
}

static uint32_t bits_of(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static void fail(const char *what, const char *arg) {
    fprintf(stderr, "expf_driver: %s: %s\n", what, arg);
    exit(2);
}

static uint64_t number(const char *s, const char *arg) {
    char *end;
    if (*s == '\0' || *s == '-') fail("not a non-negative integer", arg);
    const unsigned long long v = strtoull(s, &end, 0);
    if (*end != '\0') fail("not a non-negative integer", arg);
    return (uint64_t)v;
}

/* One vector of inputs lo + i .. (up to KL_FV_LANES of them, m counted): results into ys (vector) and ws (expf). */
static int vector_at(uint64_t lo, uint64_t i, uint64_t n, float *xs, float *ys, float *ws) {
    uint32_t u[KL_FV_LANES];
    const int m = n - i < (uint64_t)KL_FV_LANES ? (int)(n - i) : KL_FV_LANES;
    for (int l = 0; l < KL_FV_LANES; l++) u[l] = (uint32_t)(lo + i + (uint64_t)(l < m ? l : 0));
    memcpy(xs, u, sizeof u);
#if KM_EXPF_DRIVER_SCALAR
    for (int l = 0; l < KL_FV_LANES; l++) ys[l] = km_expf(xs[l]);
#else
    kl_fv_storeu(ys, kl_fv_expf(kl_fv_loadu(xs)));
#endif
    for (int l = 0; l < m; l++) ws[l] = expf(xs[l]);
    return m;
}

static range_result run_range(uint64_t lo, uint64_t n) {
    range_result r = {0, 0, 0, 0, FNV_OFFSET, FNV_OFFSET};
    float xs[KL_FV_LANES], ys[KL_FV_LANES], ws[KL_FV_LANES];
    for (uint64_t i = 0; i < n; i += KL_FV_LANES) {
        const int m = vector_at(lo, i, n, xs, ys, ws);
        for (int l = 0; l < m; l++) {
            const uint32_t got = bits_of(ys[l]), want = bits_of(ws[l]);
            r.hash = fnv1a32(r.hash, got);
            r.libm_hash = fnv1a32(r.libm_hash, want);
            if (got != want) {
                if (r.bad == 0) {
                    r.first = bits_of(xs[l]);
                    r.got = got;
                    r.want = want;
                }
                r.bad++;
            }
        }
    }
    return r;
}

static void check_range(uint64_t lo, uint64_t n, const char *arg) {
    if (lo > 0xffffffffULL || n > (1ULL << 32) - lo) fail("range not within the 2^32 float bit patterns", arg);
}

static void report(uint64_t lo, uint64_t n) {
    const range_result r = run_range(lo, n);
    printf("%08" PRIx64 " %" PRIu64 " %" PRIu64 " %08" PRIx32 " %08" PRIx32 " %08" PRIx32 " %016" PRIx64 " %016" PRIx64
           "\n", lo, n, r.bad, r.first, r.got, r.want, r.hash, r.libm_hash);
    fflush(stdout);
}

static void report_arg(char *arg) {
    char *colon = strchr(arg, ':');
    if (colon == NULL) fail("expected LO:N", arg);
    *colon = '\0';
    const uint64_t lo = number(arg, arg), n = number(colon + 1, colon + 1);
    check_range(lo, n, arg);
    report(lo, n);
}

static void values(uint64_t lo, uint64_t n) {
    float xs[KL_FV_LANES], ys[KL_FV_LANES], ws[KL_FV_LANES];
    for (uint64_t i = 0; i < n; i += KL_FV_LANES) {
        const int m = vector_at(lo, i, n, xs, ys, ws);
        for (int l = 0; l < m; l++) {
            printf("%08" PRIx32 " %08" PRIx32 " %08" PRIx32 "\n", bits_of(xs[l]), bits_of(ys[l]), bits_of(ws[l]));
        }
    }
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "--values") == 0) {
        if (argc != 4) fail("usage", "expf_driver --values LO N");
        const uint64_t lo = number(argv[2], argv[2]), n = number(argv[3], argv[3]);
        check_range(lo, n, argv[2]);
        values(lo, n);
        return 0;
    }
    if (argc > 1) {
        for (int a = 1; a < argc; a++) report_arg(argv[a]);
        return 0;
    }
    char line[256];
    while (fgets(line, sizeof line, stdin) != NULL) {
        line[strcspn(line, "\r\n")] = '\0';
        char *sp = strchr(line, ' ');
        if (sp != NULL) *sp = ':';
        if (line[0] != '\0') report_arg(line);
    }
    return 0;
}
