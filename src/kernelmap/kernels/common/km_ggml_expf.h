/* km_ggml_expf.h — scalar emulation of ggml's 16-lane AVX-512 expf (ggml_v_expf), lane by lane, bit for bit.
 *
 * Contract: km_ggml_v_expf(x) returns exactly what one lane of ggml_v_expf (llama.cpp's ggml-cpu
 * vec.h, AVX-512 F/DQ build) returns for x: z = fma(x, 0x1.715476p+0f, 0x1.8p23f); n = z - 0x1.8p23f;
 * b = fma(-n, 0x1.7f7d1cp-20f, fma(-n, 0x1.62e4p-1f, x)); u = b*b;
 * j = fma(fma(fma(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), u, fma(0x1.555e66p-3f, b, 0x1.fffdb6p-2f)), u,
 *         fma(0x1.ffffecp-1f, b, 1));
 * result = |n| > 192 ? (n <= 0 ? +0 : +inf) : j * 2^n (vscalefps; ldexpf rounds the same way, including
 * subnormal results); NaN in, NaN out. km_ggml_v_silu(x) is one lane of ggml_v_silu:
 * x / (1 + v_expf(0 - x)). Every step is one IEEE f32 operation or one fmaf, so a caller compiled with
 * -ffp-contract=off reproduces the vector code exactly. This is the softmax / SiLU exp of ggml's
 * x86 AVX-512 build (the peer); its AVX2 build uses another polynomial: km_ggml_v_expf8 below.
 */
#ifndef KM_GGML_EXPF_H
#define KM_GGML_EXPF_H

#include <math.h>
#include <stdint.h>
#include <string.h>

static inline float km_ggml_v_expf(float x) {
    const float r = 0x1.8p23f;
    const float z = fmaf(x, 0x1.715476p+0f, r);
    const float n = z - r;
    if (isnan(n)) return n;
    const float b = fmaf(-n, 0x1.7f7d1cp-20f, fmaf(-n, 0x1.62e4p-1f, x));
    const float u = b * b;
    const float j = fmaf(fmaf(fmaf(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), u, fmaf(0x1.555e66p-3f, b, 0x1.fffdb6p-2f)),
                         u, fmaf(0x1.ffffecp-1f, b, 1.0f));
    if (fabsf(n) > 192.0f) return n <= 0.0f ? 0.0f : INFINITY;
    return ldexpf(j, (int)n);
}

static inline float km_ggml_v_silu(float x) {
    return x / (1.0f + km_ggml_v_expf(0.0f - x));
}

/* One lane of ggml_v_expf in llama.cpp's x86 AVX2 + FMA build (its aarch64 NEON build runs the same steps on 4
 * lanes): the same z, n, b and u as above, then
 *   j = fma(fma(fma(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), u, fma(0x1.555e66p-3f, b, 0x1.fffdb6p-2f)), u,
 *           0x1.ffffecp-1f * b)                       (the polynomial without its constant 1)
 *   k = the f32 whose bits are (bits(z) << 23) + bits(1.0f)   (2^n while |n| <= 126: n sits in z's low bits)
 *   |n| <= 126 (or n NaN): fma(j, k, k)
 *   126 < |n| <= 192: with g = n <= 0 ? 0x82000000 : 0, s1 = bits (g + 0x7f000000), s2 = bits (bits(z) << 23) - g:
 *                     fma(s2, j, s2) * s1             (2^n split in two factors: the product rounds once)
 *   |n| > 192: s1 * s1                                (+inf for n > 0, +0 for n <= 0)
 * All integer steps are on uint32 bit patterns (wrapping), as the vector code's. km_ggml_v_silu8(x) is one lane
 * of that build's ggml_v_silu: x / (1 + v_expf(0 - x)). */
static inline float km_f32_from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static inline float km_ggml_v_expf8(float x) {
    const float r = 0x1.8p23f;
    const float z = fmaf(x, 0x1.715476p+0f, r);
    const float n = z - r;
    const float b = fmaf(-n, 0x1.7f7d1cp-20f, fmaf(-n, 0x1.62e4p-1f, x));
    uint32_t zb;
    memcpy(&zb, &z, 4);
    const uint32_t e = zb << 23;
    const float k = km_f32_from_bits(e + 0x3F800000u);
    const float u = b * b;
    const float j = fmaf(fmaf(fmaf(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), u, fmaf(0x1.555e66p-3f, b, 0x1.fffdb6p-2f)), u,
                         0x1.ffffecp-1f * b);
    if (!(fabsf(n) > 126.0f)) return fmaf(j, k, k);
    const uint32_t g = n <= 0.0f ? 0x82000000u : 0u;
    const float s1 = km_f32_from_bits(g + 0x7F000000u);
    const float s2 = km_f32_from_bits(e - g);
    if (fabsf(n) > 192.0f) return s1 * s1;
    return fmaf(s2, j, s2) * s1;
}

static inline float km_ggml_v_silu8(float x) {
    return x / (1.0f + km_ggml_v_expf8(0.0f - x));
}

#endif /* KM_GGML_EXPF_H */
