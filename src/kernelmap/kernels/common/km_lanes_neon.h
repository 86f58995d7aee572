/* km_lanes_neon.h — the lanes interface (km_lanes.h) on AArch64 AdvSIMD (armv8-a), with SDOT dot
 * products when the including file is compiled with +dotprod.
 *
 * kl_f8 is two q registers (lanes 0-3, 4-7), a row pair two kl_f8. The float operations are the same
 * single IEEE operations the x86 lanes use (vfmaq_f32 is fused like vfmadd; nothing else is), in the
 * same operand order, and AArch64's default FPCR (no flush-to-zero, round to nearest even) matches
 * x86's default MXCSR, so an instantiation here gives the x86 instantiations' bits.
 * 32-element dots take the weights signed (code - off) against signed activations: SDOT gives the
 * eight lanes of four products directly; without it, vmull_s8 (int16 products, |p| <= 16384) and two
 * pairwise widening adds give the same exact sums.
 */
#ifndef KM_LANES_NEON_H
#define KM_LANES_NEON_H

#include <arm_neon.h>

#include "km_lanes.h"

#if defined(__ARM_FEATURE_DOTPROD)
#define KL_ISA_NAME "dotprod"
#else
#define KL_ISA_NAME "neon"
#endif

typedef struct {
    float32x4_t lo, hi;
} kl_f8;

KL_INLINE kl_f8 kl_f8_zero(void) { return (kl_f8){vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)}; }
KL_INLINE kl_f8 kl_f8_set1(float s) { return (kl_f8){vdupq_n_f32(s), vdupq_n_f32(s)}; }
KL_INLINE kl_f8 kl_f8_loadu(const float *p) { return (kl_f8){vld1q_f32(p), vld1q_f32(p + 4)}; }
KL_INLINE void kl_f8_storeu(float *p, kl_f8 v) {
    vst1q_f32(p, v.lo);
    vst1q_f32(p + 4, v.hi);
}
KL_INLINE kl_f8 kl_f8_add(kl_f8 a, kl_f8 b) { return (kl_f8){vaddq_f32(a.lo, b.lo), vaddq_f32(a.hi, b.hi)}; }
KL_INLINE kl_f8 kl_f8_sub(kl_f8 a, kl_f8 b) { return (kl_f8){vsubq_f32(a.lo, b.lo), vsubq_f32(a.hi, b.hi)}; }
KL_INLINE kl_f8 kl_f8_mul(kl_f8 a, kl_f8 b) { return (kl_f8){vmulq_f32(a.lo, b.lo), vmulq_f32(a.hi, b.hi)}; }
KL_INLINE kl_f8 kl_f8_fma(kl_f8 a, kl_f8 b, kl_f8 c) {
    return (kl_f8){vfmaq_f32(c.lo, a.lo, b.lo), vfmaq_f32(c.hi, a.hi, b.hi)};
}
KL_INLINE kl_f8 kl_f8_bcast(kl_f8 v, int j) {
    float t[8];
    kl_f8_storeu(t, v);
    const float32x4_t d = vld1q_dup_f32(t + j);
    return (kl_f8){d, d};
}

KL_INLINE kl_f8 kl_f8_f16s(const uint8_t *p, int64_t stride, int n) {
    uint16_t h[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int j = 0; j < n; j++) memcpy(&h[j], p + j * stride, 2);
    return (kl_f8){vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(h))),
                   vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(h + 4)))};
}

KL_INLINE float kl_f8_fold(kl_f8 v) {
    const float32x4_t h = vaddq_f32(v.lo, v.hi);                          /* v_l + v_{l+4} */
    const float32x2_t g = vadd_f32(vget_low_f32(h), vget_high_f32(h));    /* h0+h2, h1+h3 */
    return vget_lane_f32(g, 0) + vget_lane_f32(g, 1);
}

KL_INLINE void kl_prefetch_l1(const void *p) { __builtin_prefetch(p, 0, 3); }
KL_INLINE void kl_prefetch_l2(const void *p) { __builtin_prefetch(p, 0, 2); }

typedef struct {
    kl_f8 a, b;
} kl_f8x2;

KL_INLINE kl_f8x2 kl_f8x2_zero(void) { return (kl_f8x2){kl_f8_zero(), kl_f8_zero()}; }
KL_INLINE kl_f8x2 kl_f8x2_fma(kl_f8x2 a, kl_f8x2 b, kl_f8x2 c) {
    return (kl_f8x2){kl_f8_fma(a.a, b.a, c.a), kl_f8_fma(a.b, b.b, c.b)};
}
KL_INLINE kl_f8x2 kl_f8x2_loadu(const float *p) { return (kl_f8x2){kl_f8_loadu(p), kl_f8_loadu(p + 8)}; }
KL_INLINE void kl_f8x2_storeu(float *p, kl_f8x2 v) {
    kl_f8_storeu(p, v.a);
    kl_f8_storeu(p + 8, v.b);
}
KL_INLINE kl_f8x2 kl_f8x2_f16s(const uint8_t *pa, const uint8_t *pb, int64_t stride, int n) {
    return (kl_f8x2){kl_f8_f16s(pa, stride, n), kl_f8_f16s(pb, stride, n)};
}
KL_INLINE kl_f8x2 kl_f8x2_mul_f8(kl_f8x2 d, kl_f8 x) { return (kl_f8x2){kl_f8_mul(d.a, x), kl_f8_mul(d.b, x)}; }
KL_INLINE kl_f8x2 kl_f8x2_bcast(kl_f8x2 v, int j) { return (kl_f8x2){kl_f8_bcast(v.a, j), kl_f8_bcast(v.b, j)}; }
KL_INLINE kl_f8x2 kl_f8x2_bcast_mem(const float *p, int j) {
    const float32x4_t a = vld1q_dup_f32(p + j), b = vld1q_dup_f32(p + 8 + j);
    return (kl_f8x2){{a, a}, {b, b}};
}
KL_INLINE void kl_f8x2_fold(kl_f8x2 v, float *a, float *b) {
    *a = kl_f8_fold(v.a);
    *b = kl_f8_fold(v.b);
}

/* ---- 32-element blocks ---- */

typedef struct {
    int8x16_t q0, q1; /* the 32 activation quants */
} kl_q32xb;

KL_INLINE void kl_q32xb_prep(kl_q32xb *p, const int8_t *qs, const int fmt) {
    (void)fmt;
    p->q0 = vld1q_s8(qs);
    p->q1 = vld1q_s8(qs + 16);
}

typedef struct {
    int8x16_t w0, w1; /* the 32 signed weight integers */
} kl_q32w;

KL_INLINE kl_q32w kl_q32w_load(const uint8_t *blk, const int fmt) {
    if (fmt == KL_Q32_Q8_0) return (kl_q32w){vld1q_s8((const int8_t *)(blk + 2)), vld1q_s8((const int8_t *)(blk + 18))};
    /* nibble formats: code = nibble | (qh bit << 4), integer = code - off; elements 0-15 low nibbles, 16-31 high */
    const uint8x16_t qs = vld1q_u8(blk + KL_Q32_QS(fmt));
    uint8x16_t c0 = vandq_u8(qs, vdupq_n_u8(0x0F));
    uint8x16_t c1 = vshrq_n_u8(qs, 4);
    if (KL_Q32_QH(fmt) >= 0) {
        uint32_t qh;
        memcpy(&qh, blk + KL_Q32_QH(fmt), 4);
        const uint8x16_t bit = vreinterpretq_u8_u64(vdupq_n_u64(0x8040201008040201ULL));
        const uint8x16_t rep0 = vcombine_u8(vdup_n_u8((uint8_t)qh), vdup_n_u8((uint8_t)(qh >> 8)));
        const uint8x16_t rep1 = vcombine_u8(vdup_n_u8((uint8_t)(qh >> 16)), vdup_n_u8((uint8_t)(qh >> 24)));
        c0 = vorrq_u8(c0, vandq_u8(vtstq_u8(rep0, bit), vdupq_n_u8(0x10)));
        c1 = vorrq_u8(c1, vandq_u8(vtstq_u8(rep1, bit), vdupq_n_u8(0x10)));
    }
    const uint8x16_t off = vdupq_n_u8((uint8_t)KL_Q32_OFF(fmt));
    return (kl_q32w){vreinterpretq_s8_u8(vsubq_u8(c0, off)), vreinterpretq_s8_u8(vsubq_u8(c1, off))};
}

/* Four int32 lanes, lane l = the exact sum of the products at 4l..4l+3 of 16 int8 pairs. */
KL_INLINE int32x4_t kl_neon_dot4(int8x16_t w, int8x16_t x) {
#if defined(__ARM_FEATURE_DOTPROD)
    return vdotq_s32(vdupq_n_s32(0), w, x);
#else
    const int32x4_t lo = vpaddlq_s16(vmull_s8(vget_low_s8(w), vget_low_s8(x)));
    const int32x4_t hi = vpaddlq_s16(vmull_high_s8(w, x));
    return vpaddq_s32(lo, hi);
#endif
}

KL_INLINE kl_f8 kl_q32_dot(kl_q32w w, const kl_q32xb *p, const int fmt) {
    (void)fmt;
    return (kl_f8){vcvtq_f32_s32(kl_neon_dot4(w.w0, p->q0)), vcvtq_f32_s32(kl_neon_dot4(w.w1, p->q1))};
}

typedef struct {
    kl_q32w a, b;
} kl_q32w2;

KL_INLINE kl_q32w2 kl_q32w2_load(const uint8_t *a, const uint8_t *b, const int fmt) {
    return (kl_q32w2){kl_q32w_load(a, fmt), kl_q32w_load(b, fmt)};
}

KL_INLINE kl_f8x2 kl_q32_dot2(kl_q32w2 w, const kl_q32xb *p, const int fmt) {
    return (kl_f8x2){kl_q32_dot(w.a, p, fmt), kl_q32_dot(w.b, p, fmt)};
}

/* Lane c = the sum of the eight lanes of v[c] (exact for integer lanes with partial sums below 2^24). */
KL_INLINE kl_f8 kl_f8_sum8(const kl_f8 v[8]) {
    float32x4_t t[8];
    for (int c = 0; c < 8; c++) t[c] = vaddq_f32(v[c].lo, v[c].hi);
    return (kl_f8){vpaddq_f32(vpaddq_f32(t[0], t[1]), vpaddq_f32(t[2], t[3])),
                   vpaddq_f32(vpaddq_f32(t[4], t[5]), vpaddq_f32(t[6], t[7]))};
}

/* Lane c = the whole-block dot of rows[c] + off against the activation block (exact). */
KL_INLINE kl_f8 kl_q32_dot8(const uint8_t *const *rows, int64_t off, const kl_q32xb *p, const int fmt) {
    kl_f8 f[8];
    for (int c = 0; c < 8; c++) f[c] = kl_q32_dot(kl_q32w_load(rows[c] + off, fmt), p, fmt);
    return kl_f8_sum8(f);
}

/* Elements 8j .. 8j + 7 of a 32-element block as their integers in f32 (exact). */
KL_INLINE kl_f8 kl_q32_values8(const uint8_t *blk, const int fmt, const int j) {
    const kl_q32w w = kl_q32w_load(blk, fmt);
    const int8x16_t h = j < 2 ? w.w0 : w.w1;
    const int16x8_t v = vmovl_s8(j & 1 ? vget_high_s8(h) : vget_low_s8(h));
    return (kl_f8){vcvtq_f32_s32(vmovl_s16(vget_low_s16(v))), vcvtq_f32_s32(vmovl_s16(vget_high_s16(v)))};
}

/* ---- float formats ---- */

KL_INLINE kl_f8 kl_f8_load_f16(const uint16_t *p) {
    return (kl_f8){vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p))), vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p + 4)))};
}

KL_INLINE kl_f8 kl_f8_load_bf16(const uint16_t *p) {
    return (kl_f8){vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(p), 16)),
                   vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(p + 4), 16))};
}

KL_INLINE void kl_f8_store_f16(uint16_t *p, kl_f8 v) {
    vst1_u16(p, vreinterpret_u16_f16(vcvt_f16_f32(v.lo)));
    vst1_u16(p + 4, vreinterpret_u16_f16(vcvt_f16_f32(v.hi)));
}

/* bf16 by integer rounding on bit 16 (ggml_compute_fp32_to_bf16); NaN: the top half with the quiet bit. */
KL_INLINE uint16x4_t kl_neon_bf16_4(float32x4_t v) {
    const uint32x4_t u = vreinterpretq_u32_f32(v);
    const uint32x4_t odd = vandq_u32(vshrq_n_u32(u, 16), vdupq_n_u32(1));
    const uint32x4_t r = vshrq_n_u32(vaddq_u32(u, vaddq_u32(odd, vdupq_n_u32(0x7FFF))), 16);
    const uint32x4_t nan = vcgtq_u32(vandq_u32(u, vdupq_n_u32(0x7FFFFFFF)), vdupq_n_u32(0x7F800000));
    const uint32x4_t q = vorrq_u32(vshrq_n_u32(u, 16), vdupq_n_u32(64));
    return vmovn_u32(vbslq_u32(nan, q, r));
}

KL_INLINE void kl_f8_store_bf16(uint16_t *p, kl_f8 v) {
    vst1_u16(p, kl_neon_bf16_4(v.lo));
    vst1_u16(p + 4, kl_neon_bf16_4(v.hi));
}

/* x with subnormal lanes replaced by zero of the same sign (|x| < 2^-126). */
KL_INLINE float32x4_t kl_neon_flush(float32x4_t x) {
    const uint32x4_t tiny = vcltq_f32(vabsq_f32(x), vdupq_n_f32(1.17549435e-38f));
    const uint32x4_t sign = vandq_u32(vreinterpretq_u32_f32(x), vdupq_n_u32(0x80000000u));
    return vreinterpretq_f32_u32(vbslq_u32(tiny, sign, vreinterpretq_u32_f32(x)));
}

/* vdpbf16ps on 4 lanes (8 bf16 pairs): odd element first, each step a fused multiply-add with DAZ / FTZ. */
KL_INLINE float32x4_t kl_neon_dpbf16_4(float32x4_t acc, const uint16_t *w, const uint16_t *x) {
    const uint32x4_t wv = vreinterpretq_u32_u16(vld1q_u16(w)), xv = vreinterpretq_u32_u16(vld1q_u16(x));
    const uint32x4_t hi = vdupq_n_u32(0xFFFF0000u);
    const float32x4_t wo = kl_neon_flush(vreinterpretq_f32_u32(vandq_u32(wv, hi)));
    const float32x4_t xo = kl_neon_flush(vreinterpretq_f32_u32(vandq_u32(xv, hi)));
    const float32x4_t we = kl_neon_flush(vreinterpretq_f32_u32(vshlq_n_u32(wv, 16)));
    const float32x4_t xe = kl_neon_flush(vreinterpretq_f32_u32(vshlq_n_u32(xv, 16)));
    const float32x4_t t = kl_neon_flush(vfmaq_f32(kl_neon_flush(acc), wo, xo));
    return kl_neon_flush(vfmaq_f32(t, we, xe));
}

KL_INLINE kl_f8 kl_f8_dpbf16(kl_f8 acc, const uint16_t *w, const uint16_t *x) {
    return (kl_f8){kl_neon_dpbf16_4(acc.lo, w, x), kl_neon_dpbf16_4(acc.hi, w + 8, x + 8)};
}

KL_INLINE kl_f8 kl_f8_abs(kl_f8 v) { return (kl_f8){vabsq_f32(v.lo), vabsq_f32(v.hi)}; }
KL_INLINE kl_f8 kl_f8_max(kl_f8 a, kl_f8 b) { return (kl_f8){vmaxq_f32(a.lo, b.lo), vmaxq_f32(a.hi, b.hi)}; }
KL_INLINE float kl_f8_hmax(kl_f8 v) { return vmaxvq_f32(vmaxq_f32(v.lo, v.hi)); }

KL_INLINE int32_t kl_f8_store_i8(int8_t *p, kl_f8 v) {
    const int32x4_t a = vcvtnq_s32_f32(v.lo), b = vcvtnq_s32_f32(v.hi); /* nearest, ties to even */
    vst1_s8(p, vmovn_s16(vcombine_s16(vmovn_s32(a), vmovn_s32(b))));
    return vaddvq_s32(vaddq_s32(a, b));
}

#endif /* KM_LANES_NEON_H */
