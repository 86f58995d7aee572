/* km_expf.h — expf with the same bits on every ISA: km_expf (scalar) and the table / constants kl_fv_expf uses.
 *
 * Contract (every kernel contract that says "expf"): the result of x86-64 glibc's expf (its FMA build, the one
 * llama.cpp's x86 builds call), bit for bit, whatever the CPU. For |x| < 0x1.6p6 (bits of |x| <= KL_EXPF_BIG) that
 * is, one IEEE operation each, in double:
 *   kd = fma(x, 32/ln2, 0x1.8p52); k = bits(kd); kd = kd - 0x1.8p52; r = fma(32/ln2, x, -kd);
 *   s = double(kl_expf_tab[k mod 32] + (k << 47)); z = fma(r, C0, C1); y = fma(r, C2, 1); y = fma(z, r * r, y);
 *   result = (float)(y * s)
 * and every other input (overflow, underflow, inf, NaN) is the C library's expf.
 *
 * Why not just the C library's expf: aarch64 glibc (2.36) rounds 32/ln2 * x to double before subtracting kd (its
 * roundtoint path; the x86 FMA build fuses both steps), so two inputs give another last bit there: 0x4202422f
 * (32.564632) and 0xc27c65d9 (-63.099461) (tests/aarch64/test_aarch64_expf.py: all 2^32 inputs under qemu). The
 * kernels call km_expf instead, so ARM computes x86's bits; on x86 km_expf equals glibc's expf for all 2^32 inputs
 * (same test, natively). Outside the main range the two C libraries agree on every input (same test), so that
 * range is left to them. fma() is the C99 fused multiply-add (one rounding), an instruction where the target has
 * one and glibc's exact software version where it has not: the same value either way.
 */
#ifndef KM_EXPF_H
#define KM_EXPF_H

#include <math.h>
#include <stdint.h>
#include <string.h>

/* 2^(i/32) correctly rounded, minus i << 47 (glibc's expf table, as kl_fv_expf and km_expf use it). */
static const uint64_t kl_expf_tab[32] __attribute__((aligned(64))) = {
    0x3ff0000000000000ULL, 0x3fefd9b0d3158574ULL, 0x3fefb5586cf9890fULL, 0x3fef9301d0125b51ULL,
    0x3fef72b83c7d517bULL, 0x3fef54873168b9aaULL, 0x3fef387a6e756238ULL, 0x3fef1e9df51fdee1ULL,
    0x3fef06fe0a31b715ULL, 0x3feef1a7373aa9cbULL, 0x3feedea64c123422ULL, 0x3feece086061892dULL,
    0x3feebfdad5362a27ULL, 0x3feeb42b569d4f82ULL, 0x3feeab07dd485429ULL, 0x3feea47eb03a5585ULL,
    0x3feea09e667f3bcdULL, 0x3fee9f75e8ec5f74ULL, 0x3feea11473eb0187ULL, 0x3feea589994cce13ULL,
    0x3feeace5422aa0dbULL, 0x3feeb737b0cdc5e5ULL, 0x3feec49182a3f090ULL, 0x3feed503b23e255dULL,
    0x3feee89f995ad3adULL, 0x3feeff76f2fb5e47ULL, 0x3fef199bdd85529cULL, 0x3fef3720dcef9069ULL,
    0x3fef5818dcfba487ULL, 0x3fef7c97337b9b5fULL, 0x3fefa4afa2a490daULL, 0x3fefd0765b6e4540ULL,
};
#define KL_EXPF_N 0x1.71547652b82fep+5 /* 32 / ln 2 */
#define KL_EXPF_SHIFT 0x1.8p+52
#define KL_EXPF_C0 0x1.c6af84b912394p-20
#define KL_EXPF_C1 0x1.ebfce50fac4f3p-13
#define KL_EXPF_C2 0x1.62e42ff0c52d6p-6
#define KL_EXPF_BIG 0x42afffffu /* |x| bits above this: glibc's special path (expf itself) */

static inline float km_expf(float x) {
    uint32_t ux;
    memcpy(&ux, &x, sizeof ux);
    if ((ux & 0x7fffffffu) > KL_EXPF_BIG) return expf(x);
    const double xd = (double)x;
    double kd = fma(xd, KL_EXPF_N, KL_EXPF_SHIFT);
    uint64_t ki;
    memcpy(&ki, &kd, sizeof ki);
    kd = kd - KL_EXPF_SHIFT;
    const double r = fma(KL_EXPF_N, xd, -kd);
    const uint64_t t = kl_expf_tab[ki & 31] + (ki << 47);
    double s;
    memcpy(&s, &t, sizeof s);
    const double z = fma(r, KL_EXPF_C0, KL_EXPF_C1);
    const double r2 = r * r;
    double y = fma(r, KL_EXPF_C2, 1.0);
    y = fma(z, r2, y);
    y = y * s;
    return (float)y;
}

#endif /* KM_EXPF_H */
