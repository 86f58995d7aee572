/* km_lanes_neon.h — the lanes interface (km_lanes.h) on AArch64 AdvSIMD (armv8-a), with SDOT dot
 * products when the including file is compiled with +dotprod.
 *
 * kl_f8 is two q registers (lanes 0-3, 4-7), a row pair two kl_f8. The float operations are the same
 * single IEEE operations the x86 lanes use (vfmaq_f32 is fused like vfmadd; nothing else is), in the
 * same operand order, and AArch64's default FPCR (no flush-to-zero, round to nearest even) matches
 * x86's default MXCSR, so an instantiation here gives the x86 instantiations' bits.
 * 32-element dots take the weights signed (q5_0: code - 16) against signed activations: SDOT gives the
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

KL_INLINE void kl_q32xb_prep(kl_q32xb *p, const km_block_q8_0 *x, const int fmt) {
    (void)fmt;
    p->q0 = vld1q_s8(x->qs);
    p->q1 = vld1q_s8(x->qs + 16);
}

typedef struct {
    int8x16_t w0, w1; /* the 32 signed weights */
} kl_q32w;

KL_INLINE kl_q32w kl_q32w_load(const uint8_t *blk, const int fmt) {
    if (fmt == KL_Q32_Q8_0) return (kl_q32w){vld1q_s8((const int8_t *)(blk + 2)), vld1q_s8((const int8_t *)(blk + 18))};
    /* q5_0: code = nibble | (qh bit << 4), weight = code - 16; elements 0-15 low nibbles, 16-31 high */
    const uint8x16_t qs = vld1q_u8(blk + 6);
    uint32_t qh;
    memcpy(&qh, blk + 2, 4);
    const uint8x16_t bit = vreinterpretq_u8_u64(vdupq_n_u64(0x8040201008040201ULL));
    const uint8x16_t rep0 = vcombine_u8(vdup_n_u8((uint8_t)qh), vdup_n_u8((uint8_t)(qh >> 8)));
    const uint8x16_t rep1 = vcombine_u8(vdup_n_u8((uint8_t)(qh >> 16)), vdup_n_u8((uint8_t)(qh >> 24)));
    const uint8x16_t h0 = vandq_u8(vtstq_u8(rep0, bit), vdupq_n_u8(0x10));
    const uint8x16_t h1 = vandq_u8(vtstq_u8(rep1, bit), vdupq_n_u8(0x10));
    const uint8x16_t c0 = vorrq_u8(vandq_u8(qs, vdupq_n_u8(0x0F)), h0);
    const uint8x16_t c1 = vorrq_u8(vshrq_n_u8(qs, 4), h1);
    return (kl_q32w){vreinterpretq_s8_u8(vsubq_u8(c0, vdupq_n_u8(16))), vreinterpretq_s8_u8(vsubq_u8(c1, vdupq_n_u8(16)))};
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

KL_INLINE kl_f8 kl_q32_dot(kl_q32w w, const kl_q32xb *p, const km_block_q8_0 *x, const int fmt) {
    (void)x;
    (void)fmt;
    return (kl_f8){vcvtq_f32_s32(kl_neon_dot4(w.w0, p->q0)), vcvtq_f32_s32(kl_neon_dot4(w.w1, p->q1))};
}

typedef struct {
    kl_q32w a, b;
} kl_q32w2;

KL_INLINE kl_q32w2 kl_q32w2_load(const uint8_t *a, const uint8_t *b, const int fmt) {
    return (kl_q32w2){kl_q32w_load(a, fmt), kl_q32w_load(b, fmt)};
}

KL_INLINE kl_f8x2 kl_q32_dot2(kl_q32w2 w, const kl_q32xb *p, const km_block_q8_0 *x, const int fmt) {
    return (kl_f8x2){kl_q32_dot(w.a, p, x, fmt), kl_q32_dot(w.b, p, x, fmt)};
}

/* ---- native-width f32 (elementwise) ---- */

#define KL_FV_LANES 4

typedef float32x4_t kl_fv;
typedef uint32x4_t kl_fvm; /* all-ones / all-zeros lanes */

KL_INLINE kl_fv kl_fv_zero(void) { return vdupq_n_f32(0.0f); }
KL_INLINE kl_fv kl_fv_set1(float s) { return vdupq_n_f32(s); }
KL_INLINE kl_fv kl_fv_loadu(const float *p) { return vld1q_f32(p); }
KL_INLINE void kl_fv_storeu(float *p, kl_fv v) { vst1q_f32(p, v); }
KL_INLINE kl_fv kl_fv_loadn(const float *p, int n) {
    float t[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    memcpy(t, p, (size_t)n * sizeof(float));
    return vld1q_f32(t);
}
KL_INLINE void kl_fv_storen(float *p, kl_fv v, int n) {
    float t[4];
    vst1q_f32(t, v);
    memcpy(p, t, (size_t)n * sizeof(float));
}
KL_INLINE kl_fv kl_fv_add(kl_fv a, kl_fv b) { return vaddq_f32(a, b); }
KL_INLINE kl_fv kl_fv_sub(kl_fv a, kl_fv b) { return vsubq_f32(a, b); }
KL_INLINE kl_fv kl_fv_mul(kl_fv a, kl_fv b) { return vmulq_f32(a, b); }
KL_INLINE kl_fv kl_fv_div(kl_fv a, kl_fv b) { return vdivq_f32(a, b); }
KL_INLINE kl_fv kl_fv_fma(kl_fv a, kl_fv b, kl_fv c) { return vfmaq_f32(c, a, b); }
KL_INLINE kl_fv kl_fv_fms(kl_fv a, kl_fv b, kl_fv c) { return vfmaq_f32(vnegq_f32(c), a, b); }
KL_INLINE kl_fv kl_fv_fnma(kl_fv a, kl_fv b, kl_fv c) { return vfmsq_f32(c, a, b); }
KL_INLINE kl_fv kl_fv_neg(kl_fv v) { return vnegq_f32(v); }
KL_INLINE kl_fv kl_fv_abs(kl_fv v) { return vabsq_f32(v); }
KL_INLINE kl_fv kl_fv_min(kl_fv a, kl_fv b) { return vbslq_f32(vcltq_f32(a, b), a, b); } /* x86 minps, NaNs too */
KL_INLINE kl_fv kl_fv_max(kl_fv a, kl_fv b) { return vbslq_f32(vcgtq_f32(a, b), a, b); }
KL_INLINE kl_fv kl_fv_round(kl_fv v) { return vrndnq_f32(v); }
KL_INLINE kl_fv kl_fv_exp2i(kl_fv v) {
    return vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(vcvtnq_s32_f32(v), vdupq_n_s32(127)), 23));
}
KL_INLINE kl_fv kl_fv_dup_even(kl_fv v) { return vtrn1q_f32(v, v); }
KL_INLINE kl_fv kl_fv_dup_odd(kl_fv v) { return vtrn2q_f32(v, v); }
KL_INLINE kl_fvm kl_fv_cmp_lt(kl_fv a, kl_fv b) { return vcltq_f32(a, b); }
KL_INLINE kl_fvm kl_fv_cmp_le(kl_fv a, kl_fv b) { return vcleq_f32(a, b); }
KL_INLINE kl_fvm kl_fv_cmp_ge(kl_fv a, kl_fv b) { return vcgeq_f32(a, b); }
KL_INLINE kl_fvm kl_fv_cmp_eq(kl_fv a, kl_fv b) { return vceqq_f32(a, b); }
KL_INLINE kl_fvm kl_fv_isnan(kl_fv v) { return vmvnq_u32(vceqq_f32(v, v)); }
KL_INLINE kl_fv kl_fv_blend(kl_fv a, kl_fv b, kl_fvm m) { return vbslq_f32(m, b, a); }
KL_INLINE unsigned kl_fvm_bits(kl_fvm m) {
    const uint32x4_t bit = {1u, 2u, 4u, 8u};
    return vaddvq_u32(vandq_u32(m, bit));
}
KL_INLINE float kl_fv_hmax(kl_fv v) { return vmaxvq_f32(v); }

/* ---- f64 partials (reductions) ---- */

typedef struct {
    float64x2_t q[8]; /* partials 2k, 2k + 1 */
} kl_d16;

KL_INLINE kl_d16 kl_d16_zero(void) {
    kl_d16 a;
    for (int k = 0; k < 8; k++) a.q[k] = vdupq_n_f64(0.0);
    return a;
}
KL_INLINE kl_d16 kl_d16_add_sq(kl_d16 a, const int j, kl_fv v) {
    const float32x4_t s = vmulq_f32(v, v);
    a.q[j / 2] = vaddq_f64(a.q[j / 2], vcvt_f64_f32(vget_low_f32(s)));
    a.q[j / 2 + 1] = vaddq_f64(a.q[j / 2 + 1], vcvt_high_f64_f32(s));
    return a;
}
KL_INLINE double kl_d16_fold(kl_d16 a) {
    for (int k = 0; k < 4; k++) a.q[k] = vaddq_f64(a.q[k], a.q[k + 4]); /* + 8 */
    for (int k = 0; k < 2; k++) a.q[k] = vaddq_f64(a.q[k], a.q[k + 2]); /* + 4 */
    const float64x2_t q = vaddq_f64(a.q[0], a.q[1]);                     /* + 2 */
    return vgetq_lane_f64(q, 0) + vgetq_lane_f64(q, 1);
}

/* ---- int8 (quantized activations) ---- */

KL_INLINE kl_fv kl_fv_cvt_i8(const int8_t *p) {
    uint32_t w;
    memcpy(&w, p, 4);
    const int16x8_t h = vmovl_s8(vreinterpret_s8_u32(vdup_n_u32(w)));
    return vcvtq_f32_s32(vmovl_s16(vget_low_s16(h)));
}
KL_INLINE void kl_fv_store_i8x32(int8_t *p, const kl_fv *v, int32_t *s) {
    for (int k = 0; k < 2; k++) {
        int32x4_t i[4];
        for (int j = 0; j < 4; j++) i[j] = vcvtnq_s32_f32(v[4 * k + j]); /* nearest, ties to even */
        const int16x8_t w0 = vcombine_s16(vqmovn_s32(i[0]), vqmovn_s32(i[1]));
        const int16x8_t w1 = vcombine_s16(vqmovn_s32(i[2]), vqmovn_s32(i[3]));
        vst1q_s8(p + 16 * k, vcombine_s8(vqmovn_s16(w0), vqmovn_s16(w1)));
        if (s) s[k] = vaddvq_s32(vaddq_s32(vaddq_s32(i[0], i[1]), vaddq_s32(i[2], i[3])));
    }
}

/* The 32 weights (code - 16) of a q5_0 block, in element order. */
KL_INLINE void kl_q5_0_i8(int8_t *out, const uint8_t *blk) {
    const kl_q32w w = kl_q32w_load(blk, KL_Q32_Q5_0);
    vst1q_s8(out, w.w0);
    vst1q_s8(out + 16, w.w1);
}

/* ---- f16 conversion ---- */

KL_INLINE kl_fv kl_fv_load_f16(const uint16_t *p) { return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p))); }
KL_INLINE void kl_fv_store_f16(uint16_t *p, kl_fv v) { vst1_u16(p, vreinterpret_u16_f16(vcvt_f16_f32(v))); }
KL_INLINE kl_fv kl_fv_f16_lut(const uint16_t *t, kl_fv v, const int clamp, const int neg) {
    const uint32x4_t h = vmovl_u16(vreinterpret_u16_f16(vcvt_f16_f32(v)));
    const uint32x4_t mag = vminq_u32(vandq_u32(h, vdupq_n_u32(0x7FFF)), vdupq_n_u32((uint32_t)clamp));
    const uint32x4_t idx = vaddq_u32(mag, vandq_u32(vtstq_u32(h, vdupq_n_u32(0x8000)), vdupq_n_u32((uint32_t)neg)));
    const uint16_t e[4] = {t[vgetq_lane_u32(idx, 0)], t[vgetq_lane_u32(idx, 1)], t[vgetq_lane_u32(idx, 2)],
                           t[vgetq_lane_u32(idx, 3)]};
    return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(e)));
}

#endif /* KM_LANES_NEON_H */
