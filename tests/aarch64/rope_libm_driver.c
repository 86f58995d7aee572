/* rope_libm_driver.c — the C library functions the RoPE kernels call (sinf, cosf, powf), hashed over their inputs.
 *
 * The RoPE refs and variants (rope/, fused/qk_norm_rope_*, common/km_rope.h) take cos / sin of angles pos * theta
 * from the C library and theta's ratio from powf(freq_base, -2 / D); for the same bits on every CPU the aarch64 and
 * x86 C libraries must agree on those inputs. test_aarch64_rope_libm.py runs this built natively and for aarch64
 * (under qemu) and compares the hashes.
 *
 * Usage: rope_libm_driver LO HI STEP — float bit patterns LO, LO + STEP, ... below HI. Prints three 64-bit FNV-1a
 * hashes (hex): of sinf's results, of cosf's, and of powf(base, -2.0f / D) for the bases of POW_BASES and every
 * even D from 2 to 1024 (independent of the arguments).
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const float POW_BASES[] = {1000.0f, 10000.0f, 500000.0f, 1000000.0f, 5000000.0f, 10000000.0f};

static uint64_t fnv(uint64_t h, float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    for (int b = 0; b < 4; b++) h = (h ^ ((u >> (8 * b)) & 0xffu)) * 0x100000001b3ULL;
    return h;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s LO HI STEP\n", argv[0]);
        return 2;
    }
    const uint64_t lo = strtoull(argv[1], NULL, 0), hi = strtoull(argv[2], NULL, 0), step = strtoull(argv[3], NULL, 0);
    if (hi > (1ULL << 32) || step == 0) {
        fprintf(stderr, "rope_libm_driver: HI at most 2^32, STEP at least 1\n");
        return 2;
    }
    uint64_t hs = 0xcbf29ce484222325ULL, hc = hs, hp = hs;
    for (uint64_t u = lo; u < hi; u += step) {
        const uint32_t b = (uint32_t)u;
        float x;
        memcpy(&x, &b, sizeof x);
        hs = fnv(hs, sinf(x));
        hc = fnv(hc, cosf(x));
    }
    for (size_t i = 0; i < sizeof POW_BASES / sizeof POW_BASES[0]; i++) {
        for (int d = 2; d <= 1024; d += 2) hp = fnv(hp, powf(POW_BASES[i], -2.0f / (float)d));
    }
    printf("%016" PRIx64 " %016" PRIx64 " %016" PRIx64 "\n", hs, hc, hp);
    return 0;
}
