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
KL_INLINE void kl_prefetch_nt(const void *p) { __builtin_prefetch(p, 0, 0); }

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
/* ---- K-quant blocks ----
 * A half block is 8 int8x16 of signed codes (q3_K's -4..3 directly; the other formats' codes fit int8),
 * piece p = values 16p .. 16p + 15 of the half (chunk p / 2, its first or second 16 values), and the
 * int32 scale of each piece. The dot of a piece is four int32 lanes of 4-product sums (SDOT, or vmull_s8
 * and pairwise widening adds: |product| <= 63 * 128 in int16), times the piece's scale (vmlaq_n_s32),
 * into lanes 0-3 (first 16 values of a chunk) or 4-7 (second 16): a kl_kqi is in contract-lane order. */

#include "km_kquant.h"

KL_INLINE float kl_h2f(uint16_t h) { return vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(h))), 0); }

typedef struct {
    int32_t e[16]; /* scale entry k: values 16k .. 16k + 15 */
} kl_kqs;

KL_INLINE kl_kqs kl_kqs_load(const uint8_t *blk, const int fmt) {
    kl_kqs s;
    if (fmt == KL_KQ_Q2_K) {
        for (int k = 0; k < 16; k++) s.e[k] = blk[k] & 0x0F;
    } else if (fmt == KL_KQ_Q3_K) {
        uint64_t w[2];
        km_q3k_scales64(blk + 96, &w[0], &w[1]);
        for (int k = 0; k < 16; k++) s.e[k] = (int32_t)((w[k >> 3] >> (8 * (k & 7))) & 0xFF) - 32;
    } else if (fmt == KL_KQ_Q6_K) {
        for (int k = 0; k < 16; k++) s.e[k] = (int8_t)blk[192 + k];
    } else {
        uint64_t sc, mn;
        km_q4k_scales64(blk + 4, &sc, &mn);
        for (int k = 0; k < 16; k++) s.e[k] = (int32_t)((sc >> (8 * (k >> 1))) & 0xFF);
    }
    return s;
}

typedef struct {
    int8x16_t w[8]; /* signed codes of the half's 8 pieces */
    int32_t s[8];   /* their scales */
} kl_kqw;

typedef struct {
    int32x4_t lo, hi; /* contract lanes 0-3, 4-7 */
} kl_kqi;

KL_INLINE kl_kqi kl_kqi_zero(void) { return (kl_kqi){vdupq_n_s32(0), vdupq_n_s32(0)}; }

/* Byte j of the result = 0xFF where bit b of byte j of v is set. */
KL_INLINE uint8x16_t kl_neon_bit(uint8x16_t v, const int b) { return vtstq_u8(v, vdupq_n_u8((uint8_t)(1u << b))); }

KL_INLINE void kl_kqw_load(kl_kqw *w, const uint8_t *blk, kl_kqs s, const int fmt, const int h) {
    const uint8x16_t m4 = vdupq_n_u8(0x0F), m3 = vdupq_n_u8(0x03);
    for (int p = 0; p < 8; p++) w->s[p] = s.e[8 * h + p];
    for (int p = 0; p < 8; p++) {
        const int c = p >> 1, i0 = 16 * (p & 1); /* chunk c of the half, its values i0 .. i0 + 15 */
        uint8x16_t u;
        if (fmt == KL_KQ_Q2_K || fmt == KL_KQ_Q3_K) {
            const uint8x16_t q = vld1q_u8(blk + (fmt == KL_KQ_Q2_K ? 16 : 32) + 32 * h + i0);
            u = vandq_u8(vshlq_u8(q, vdupq_n_s8((int8_t)(-2 * c))), m3);
            if (fmt == KL_KQ_Q3_K) {
                const uint8x16_t set = kl_neon_bit(vld1q_u8(blk + i0), 4 * h + c);
                w->w[p] = vsubq_s8(vreinterpretq_s8_u8(u), vreinterpretq_s8_u8(vbicq_u8(vdupq_n_u8(4), set)));
                continue;
            }
        } else if (fmt == KL_KQ_Q4_K || fmt == KL_KQ_Q5_K) {
            const uint8x16_t q = vld1q_u8(blk + (fmt == KL_KQ_Q4_K ? 16 : 48) + 64 * h + 32 * (c >> 1) + i0);
            u = (c & 1) ? vshrq_n_u8(q, 4) : vandq_u8(q, m4);
            if (fmt == KL_KQ_Q5_K)
                u = vorrq_u8(u, vandq_u8(kl_neon_bit(vld1q_u8(blk + 16 + i0), 4 * h + c), vdupq_n_u8(0x10)));
        } else { /* q6_K */
            const uint8x16_t ql = vld1q_u8(blk + 64 * h + 32 * (c & 1) + i0);
            const uint8x16_t qh = vld1q_u8(blk + 128 + 32 * h + i0);
            const uint8x16_t lo = (c & 2) ? vshrq_n_u8(ql, 4) : vandq_u8(ql, m4);
            const uint8x16_t hi = vandq_u8(vshlq_u8(qh, vdupq_n_s8((int8_t)(-2 * c))), m3);
            u = vorrq_u8(lo, vshlq_n_u8(hi, 4));
        }
        w->w[p] = vreinterpretq_s8_u8(u);
    }
}

KL_INLINE kl_kqi kl_kqi_seed(kl_kqs s, const km_block_q8_k *x, const int fmt) {
    if (fmt != KL_KQ_Q6_K) return kl_kqi_zero();
    int32_t t[8];
    for (int l = 0; l < 8; l++)
        t[l] = -32 * (s.e[2 * l] * (int32_t)x->bsums[2 * l] + s.e[2 * l + 1] * (int32_t)x->bsums[2 * l + 1]);
    return (kl_kqi){vld1q_s32(t), vld1q_s32(t + 4)};
}

KL_INLINE kl_kqi kl_kqi_dot(kl_kqi acc, const kl_kqw *w, const int8_t *xq, const int fmt) {
    (void)fmt;
    for (int p = 0; p < 8; p++) {
        const int32x4_t d = kl_neon_dot4(w->w[p], vld1q_s8(xq + 16 * p));
        if (p & 1) acc.hi = vmlaq_n_s32(acc.hi, d, w->s[p]);
        else acc.lo = vmlaq_n_s32(acc.lo, d, w->s[p]);
    }
    return acc;
}

KL_INLINE void kl_kqw_codes(int8_t *out, const kl_kqw *w, const int fmt) {
    (void)fmt;
    for (int p = 0; p < 8; p++) vst1q_s8(out + 16 * p, w->w[p]);
}

KL_INLINE kl_f8 kl_f8_cvt_i8(const int8_t *p, const int off) {
    const int16x8_t v = vsubq_s16(vmovl_s8(vld1_s8(p)), vdupq_n_s16((int16_t)off));
    return (kl_f8){vcvtq_f32_s32(vmovl_s16(vget_low_s16(v))), vcvtq_f32_s32(vmovl_s16(vget_high_s16(v)))};
}

KL_INLINE kl_kqi kl_kqi_dott(kl_kqi acc, const kl_kqw *w, const int8_t *xq, const int fmt) {
    return kl_kqi_dot(acc, w, xq, fmt);
}

KL_INLINE kl_f8 kl_kqi_lanes(kl_kqi acc) { return (kl_f8){vcvtq_f32_s32(acc.lo), vcvtq_f32_s32(acc.hi)}; }

KL_INLINE kl_f8x2 kl_kqi_lanes2(kl_kqi a, kl_kqi b) { return (kl_f8x2){kl_kqi_lanes(a), kl_kqi_lanes(b)}; }
KL_INLINE kl_f8x2 kl_f8x2_set2(float a, float b) { return (kl_f8x2){kl_f8_set1(a), kl_f8_set1(b)}; }
KL_INLINE kl_f8x2 kl_f8x2_mul(kl_f8x2 a, kl_f8x2 b) { return (kl_f8x2){kl_f8_mul(a.a, b.a), kl_f8_mul(a.b, b.b)}; }

KL_INLINE void kl_kqi_store4(int32_t *p, kl_kqi acc) { vst1q_s32(p, vaddq_s32(acc.lo, acc.hi)); }

KL_INLINE kl_f8 kl_f8_cvt_sum4(const int32_t t[8][4]) {
    const int32x4_t a = vpaddq_s32(vpaddq_s32(vld1q_s32(t[0]), vld1q_s32(t[1])), vpaddq_s32(vld1q_s32(t[2]), vld1q_s32(t[3])));
    const int32x4_t b = vpaddq_s32(vpaddq_s32(vld1q_s32(t[4]), vld1q_s32(t[5])), vpaddq_s32(vld1q_s32(t[6]), vld1q_s32(t[7])));
    return (kl_f8){vcvtq_f32_s32(a), vcvtq_f32_s32(b)};
}

KL_INLINE kl_f8 kl_f8_kq_minlanes(const uint8_t *blk, const km_block_q8_k *x, const int fmt) {
    int32_t t[8];
    if (fmt == KL_KQ_Q2_K) {
        for (int l = 0; l < 8; l++)
            t[l] = (blk[2 * l] >> 4) * (int32_t)x->bsums[2 * l] + (blk[2 * l + 1] >> 4) * (int32_t)x->bsums[2 * l + 1];
    } else {
        uint64_t sc, mn;
        km_q4k_scales64(blk + 4, &sc, &mn);
        for (int k = 0; k < 8; k++) t[k] = 0;
        for (int k = 0; k < 4; k++)
            for (int i = 0; i < 2; i++) {
                const int j = 2 * k + i;
                t[k] += (int32_t)((mn >> (8 * j)) & 0xFF) * ((int32_t)x->bsums[2 * j] + x->bsums[2 * j + 1]);
            }
    }
    return (kl_f8){vcvtq_f32_s32(vld1q_s32(t)), vcvtq_f32_s32(vld1q_s32(t + 4))};
}

KL_INLINE kl_f8 kl_f8_f16x8(const uint16_t *p) {
    return (kl_f8){vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p))), vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p + 4)))};
}

typedef struct {
    int16x8_t m[16]; /* column j's mins: m[2j] (and m[2j + 1] for q2_K's 16) */
} kl_kqm;

KL_INLINE kl_kqm kl_kqm_load(const uint8_t *mn, const int fmt) {
    kl_kqm r;
    const int n = KL_KQ_NMIN(fmt);
    for (int j = 0; j < 8; j++) {
        r.m[2 * j] = vreinterpretq_s16_u16(vmovl_u8(vld1_u8(mn + n * j)));
        r.m[2 * j + 1] = n == 16 ? vreinterpretq_s16_u16(vmovl_u8(vld1_u8(mn + n * j + 8))) : vdupq_n_s16(0);
    }
    return r;
}

KL_INLINE kl_f8 kl_f8_kq_imin(const kl_kqm *m, const km_block_q8_k *x, const int fmt) {
    int16x8_t b0, b1;
    if (fmt == KL_KQ_Q2_K) {
        b0 = vld1q_s16(x->bsums);
        b1 = vld1q_s16(x->bsums + 8);
    } else { /* pair sums bsums[2k] + bsums[2k+1] */
        b0 = vpaddq_s16(vld1q_s16(x->bsums), vld1q_s16(x->bsums + 8));
        b1 = vdupq_n_s16(0);
    }
    int32_t r[8];
    for (int j = 0; j < 8; j++) {
        int32x4_t a = vmull_s16(vget_low_s16(m->m[2 * j]), vget_low_s16(b0));
        a = vmlal_s16(a, vget_high_s16(m->m[2 * j]), vget_high_s16(b0));
        if (fmt == KL_KQ_Q2_K) {
            a = vmlal_s16(a, vget_low_s16(m->m[2 * j + 1]), vget_low_s16(b1));
            a = vmlal_s16(a, vget_high_s16(m->m[2 * j + 1]), vget_high_s16(b1));
        }
        r[j] = vaddvq_s32(a);
    }
    return (kl_f8){vcvtq_f32_s32(vld1q_s32(r)), vcvtq_f32_s32(vld1q_s32(r + 4))};
}

/* ---- flash attention (attention/ggmlfa_body.h) ---- */
KL_INLINE kl_fv kl_fv_rt16(kl_fv v) { return vcvt_f32_f16(vcvt_f16_f32(v)); }

/* 2 lanes of expf's main path in double (the same IEEE operations as the x86 build's glibc) */
KL_INLINE float32x2_t kl_neon_expf2(float32x2_t x) {
    const float64x2_t n = vdupq_n_f64(KL_EXPF_N), shift = vdupq_n_f64(KL_EXPF_SHIFT);
    const float64x2_t xd = vcvt_f64_f32(x);
    float64x2_t kd = vfmaq_f64(shift, n, xd);
    const uint64x2_t ki = vreinterpretq_u64_f64(kd);
    kd = vsubq_f64(kd, shift);
    const float64x2_t r = vfmaq_f64(vnegq_f64(kd), n, xd);
    uint64x2_t t = vcombine_u64(vcreate_u64(kl_expf_tab[vgetq_lane_u64(ki, 0) & 31]),
                                vcreate_u64(kl_expf_tab[vgetq_lane_u64(ki, 1) & 31]));
    t = vaddq_u64(t, vshlq_n_u64(ki, 47));
    const float64x2_t z = vfmaq_f64(vdupq_n_f64(KL_EXPF_C1), r, vdupq_n_f64(KL_EXPF_C0));
    const float64x2_t r2 = vmulq_f64(r, r);
    float64x2_t y = vfmaq_f64(vdupq_n_f64(1.0), r, vdupq_n_f64(KL_EXPF_C2));
    y = vfmaq_f64(y, z, r2);
    y = vmulq_f64(y, vreinterpretq_f64_u64(t));
    return vcvt_f32_f64(y);
}

KL_INLINE kl_fv kl_fv_expf(kl_fv x) {
    float32x4_t y = vcombine_f32(kl_neon_expf2(vget_low_f32(x)), kl_neon_expf2(vget_high_f32(x)));
    const uint32x4_t special = vcgtq_u32(vandq_u32(vreinterpretq_u32_f32(x), vdupq_n_u32(0x7fffffffu)),
                                         vdupq_n_u32(KL_EXPF_BIG));
    if (__builtin_expect(vmaxvq_u32(special) != 0, 0)) {
        float xs[4], ys[4];
        uint32_t sp[4];
        vst1q_f32(xs, x);
        vst1q_f32(ys, y);
        vst1q_u32(sp, special);
        for (int l = 0; l < 4; l++) {
            if (sp[l]) ys[l] = __builtin_expf(xs[l]);
        }
        y = vld1q_f32(ys);
    }
    return y;
}

/* per key: 16 -> 8 -> 4 lanes by vector adds, then (l, l+2) and the last pair */
KL_INLINE void kl_fold16x16(float *s, const float *p) {
    for (int k = 0; k < 16; k++) {
        const float *pk = p + 16 * k;
        const float32x4_t h0 = vaddq_f32(vld1q_f32(pk), vld1q_f32(pk + 8));
        const float32x4_t h1 = vaddq_f32(vld1q_f32(pk + 4), vld1q_f32(pk + 12));
        const float32x4_t q = vaddq_f32(h0, h1);
        const float32x2_t u = vadd_f32(vget_low_f32(q), vget_high_f32(q));
        s[k] = vget_lane_f32(u, 0) + vget_lane_f32(u, 1);
    }
}

KL_INLINE kl_fv kl_fv_prefix_max(kl_fv v, float m) {
    const float32x4_t ninf = vdupq_n_f32(-__builtin_inff());
    float32x4_t e = vextq_f32(ninf, v, 3); /* v shifted up one lane */
    v = vbslq_f32(vcgtq_f32(v, e), v, e);
    e = vextq_f32(ninf, v, 2);
    v = vbslq_f32(vcgtq_f32(v, e), v, e);
    const float32x4_t x = vextq_f32(ninf, v, 3), mm = vdupq_n_f32(m);
    return vbslq_f32(vcgtq_f32(x, mm), x, mm);
}

/* w5-kq additions */

/* kl_kqw_loadf (km_lanes.h): kl_kqw_load is already this ISA's shortest unpack. */
KL_INLINE void kl_kqw_loadf(kl_kqw *w, const uint8_t *blk, kl_kqs s, const int fmt, const int h) {
    kl_kqw_load(w, blk, s, fmt, h);
}

/* kl_kq_imin1 (km_lanes.h): widening multiplies of the mins by the bsums (q4_K/q5_K: their pair sums), then an
 * int32 fold (exact). */
KL_INLINE int32_t kl_kq_imin1(const uint8_t *blk, const km_block_q8_k *x, const int fmt) {
    const int16x8_t b0 = vld1q_s16(x->bsums), b1 = vld1q_s16(x->bsums + 8);
    int32x4_t p;
    if (fmt == KL_KQ_Q2_K) {
        const int16x8_t m0 = vreinterpretq_s16_u16(vmovl_u8(vshr_n_u8(vld1_u8(blk), 4)));
        const int16x8_t m1 = vreinterpretq_s16_u16(vmovl_u8(vshr_n_u8(vld1_u8(blk + 8), 4)));
        p = vmull_s16(vget_low_s16(m0), vget_low_s16(b0));
        p = vmlal_s16(p, vget_high_s16(m0), vget_high_s16(b0));
        p = vmlal_s16(p, vget_low_s16(m1), vget_low_s16(b1));
        p = vmlal_s16(p, vget_high_s16(m1), vget_high_s16(b1));
    } else {
        uint64_t sc, mn;
        km_q4k_scales64(blk + 4, &sc, &mn);
        const int16x8_t m = vreinterpretq_s16_u16(vmovl_u8(vcreate_u8(mn)));
        const int16x8_t ps = vpaddq_s16(b0, b1); /* ps[j] = bsums[2j] + bsums[2j+1] */
        p = vmull_s16(vget_low_s16(m), vget_low_s16(ps));
        p = vmlal_s16(p, vget_high_s16(m), vget_high_s16(ps));
    }
    return vaddvq_s32(p);
}

/* w5-forks-lin additions */

/* 16-lane contract vectors: four q registers, lanes 4i .. 4i + 3 in q[i]. */
typedef struct {
    float32x4_t q[4];
} kl_f16v;

KL_INLINE kl_f16v kl_f16v_zero(void) {
    const float32x4_t z = vdupq_n_f32(0.0f);
    return (kl_f16v){{z, z, z, z}};
}
KL_INLINE kl_f16v kl_f16v_set1(float s) {
    const float32x4_t v = vdupq_n_f32(s);
    return (kl_f16v){{v, v, v, v}};
}
KL_INLINE kl_f16v kl_f16v_loadu(const float *p) {
    return (kl_f16v){{vld1q_f32(p), vld1q_f32(p + 4), vld1q_f32(p + 8), vld1q_f32(p + 12)}};
}
KL_INLINE kl_f16v kl_f16v_loadn(const float *p, int n) {
    float t[16] = {0};
    memcpy(t, p, (size_t)n * sizeof(float));
    return kl_f16v_loadu(t);
}
KL_INLINE kl_f16v kl_f16v_mul(kl_f16v a, kl_f16v b) {
    kl_f16v r;
    for (int i = 0; i < 4; i++) r.q[i] = vmulq_f32(a.q[i], b.q[i]);
    return r;
}
KL_INLINE kl_f16v kl_f16v_fma(kl_f16v a, kl_f16v b, kl_f16v c) {
    kl_f16v r;
    for (int i = 0; i < 4; i++) r.q[i] = vfmaq_f32(c.q[i], a.q[i], b.q[i]);
    return r;
}
KL_INLINE kl_f16v kl_f16v_cvt_i8(const int8_t *p) {
    const int8x16_t q = vld1q_s8(p);
    const int16x8_t l = vmovl_s8(vget_low_s8(q)), h = vmovl_s8(vget_high_s8(q));
    return (kl_f16v){{vcvtq_f32_s32(vmovl_s16(vget_low_s16(l))), vcvtq_f32_s32(vmovl_s16(vget_high_s16(l))),
                      vcvtq_f32_s32(vmovl_s16(vget_low_s16(h))), vcvtq_f32_s32(vmovl_s16(vget_high_s16(h)))}};
}
KL_INLINE float kl_f16v_fold(kl_f16v v) {
    return kl_f8_fold((kl_f8){vaddq_f32(v.q[0], v.q[2]), vaddq_f32(v.q[1], v.q[3])});
}
KL_INLINE kl_f16v kl_f16v_add(kl_f16v a, kl_f16v b) {
    kl_f16v r;
    for (int i = 0; i < 4; i++) r.q[i] = vaddq_f32(a.q[i], b.q[i]);
    return r;
}
KL_INLINE kl_f16v kl_f16v_of2(kl_f8 lo, kl_f8 hi) { return (kl_f16v){{lo.lo, lo.hi, hi.lo, hi.hi}}; }
KL_INLINE kl_f16v kl_f16v_load_f16(const uint16_t *p) { return kl_f16v_of2(kl_f8_load_f16(p), kl_f8_load_f16(p + 8)); }
KL_INLINE kl_f16v kl_f16v_load_bf16(const uint16_t *p) { return kl_f16v_of2(kl_f8_load_bf16(p), kl_f8_load_bf16(p + 8)); }
KL_INLINE kl_f16v kl_f16v_dpbf16(kl_f16v acc, const uint16_t *w, const uint16_t *x) {
    kl_f16v r;
    for (int i = 0; i < 4; i++) r.q[i] = kl_neon_dpbf16_4(acc.q[i], w + 8 * i, x + 8 * i);
    return r;
}


/* Row pairs, 32-element blocks: lane c (c < n) of A / B = (float) the exact int32 sum of the 32 products of
 * w[c]'s row A / B against p[c] (kl_q32_dot2's products, all of a block); lanes >= n = +0. */
KL_INLINE kl_f8x2 kl_q32_isum8x2(const kl_q32w2 w[8], const kl_q32xb *p, const int fmt, const int n) {
    kl_f8 a[8], b[8];
    for (int j = 0; j < 8; j++) {
        const kl_f8x2 v = j < n ? kl_q32_dot2(w[j], &p[j], fmt) : kl_f8x2_zero();
        a[j] = v.a;
        b[j] = v.b;
    }
    return (kl_f8x2){kl_f8_sum8(a), kl_f8_sum8(b)};
}


/* Four int32 at p whose sum is sum_{j<8} mn_j * (bsums[2j] + bsums[2j+1]) (mn_j byte j of mn; exact). */
KL_INLINE void kl_kq_imin4(int32_t *p, uint64_t mn, const km_block_q8_k *x) {
    const int16x8_t ps = vpaddq_s16(vld1q_s16(x->bsums), vld1q_s16(x->bsums + 8));
    const int16x8_t m = vreinterpretq_s16_u16(vmovl_u8(vcreate_u8(mn)));
    vst1q_s32(p, vmlal_s16(vmull_s16(vget_low_s16(m), vget_low_s16(ps)), vget_high_s16(m), vget_high_s16(ps)));
}

/* w5-forks-attn additions */

KL_INLINE kl_fv kl_fv_round_away(kl_fv v) { return vrndaq_f32(v); }

KL_INLINE float kl_fv_fold_halves(kl_fv v) {
    const float32x2_t u = vadd_f32(vget_low_f32(v), vget_high_f32(v));
    return vget_lane_f32(u, 0) + vget_lane_f32(u, 1);
}

/* w6-gemm additions (km_lanes.h): column-lane int32, four lanes. Codes are <= 127, so the unsigned weight
 * bytes are also valid signed ones: SDOT (dotprod) or widening multiplies (plain NEON) give the same exact sums. */

#define KL_IV 1
typedef int32x4_t kl_iv;
KL_INLINE kl_iv kl_iv_zero(void) { return vdupq_n_s32(0); }
KL_INLINE kl_iv kl_iv_load(const void *p) { return vld1q_s32((const int32_t *)p); }
KL_INLINE void kl_iv_store(void *p, kl_iv v) { vst1q_s32((int32_t *)p, v); }
KL_INLINE kl_iv kl_iv_add(kl_iv a, kl_iv b) { return vaddq_s32(a, b); }
KL_INLINE kl_iv kl_iv_mullo(kl_iv a, kl_iv b) { return vmulq_s32(a, b); }
/* The 4 bytes at p in every 32-bit lane. */
KL_INLINE int8x16_t kl_neon_bcast32(const void *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return vreinterpretq_s8_s32(vdupq_n_s32(v));
}
KL_INLINE kl_iv kl_iv_dp4(kl_iv acc, kl_iv w, const int8_t *x) {
#if defined(__ARM_FEATURE_DOTPROD)
    return vdotq_s32(acc, vreinterpretq_s8_s32(w), kl_neon_bcast32(x));
#else
    return vaddq_s32(acc, kl_neon_dot4(vreinterpretq_s8_s32(w), kl_neon_bcast32(x)));
#endif
}
KL_INLINE kl_iv kl_iv_dp4s(kl_iv acc, kl_iv w, const int8_t *x, kl_iv s) {
    const kl_iv d = kl_neon_dot4(vreinterpretq_s8_s32(w), kl_neon_bcast32(x));
    return vmlaq_s32(acc, d, vshrq_n_s32(vshlq_n_s32(s, 16), 16)); /* the scale: s's low int16 */
}
KL_INLINE kl_iv kl_iv_dp2w(kl_iv acc, kl_iv w, const int16_t *x) {
    const int16x8_t w16 = vreinterpretq_s16_s32(w), x2 = vreinterpretq_s16_s8(kl_neon_bcast32(x));
    return vaddq_s32(acc, vpaddq_s32(vmull_s16(vget_low_s16(w16), vget_low_s16(x2)), vmull_high_s16(w16, x2)));
}
KL_INLINE kl_iv kl_iv_gather32(const uint8_t *p, int64_t stride, int n) {
    int32_t v[4] = {0, 0, 0, 0};
    for (int c = 0; c < 4 && c < n; c++) memcpy(&v[c], p + c * stride, 4);
    return vld1q_s32(v);
}
KL_INLINE kl_iv kl_iv_nib_lo(kl_iv v) { return vreinterpretq_s32_u8(vandq_u8(vreinterpretq_u8_s32(v), vdupq_n_u8(0x0F))); }
KL_INLINE kl_iv kl_iv_nib_hi(kl_iv v) { return vreinterpretq_s32_u8(vshrq_n_u8(vreinterpretq_u8_s32(v), 4)); }
KL_INLINE kl_iv kl_iv_or(kl_iv a, kl_iv b) { return vorrq_s32(a, b); }
KL_INLINE kl_iv kl_iv_srl_and8(kl_iv v, const int n, const int m) {
    const uint32x4_t u = vshlq_u32(vreinterpretq_u32_s32(v), vdupq_n_s32(-n));
    return vreinterpretq_s32_u8(vandq_u8(vreinterpretq_u8_u32(u), vdupq_n_u8((uint8_t)m)));
}
KL_INLINE kl_iv kl_iv_sll32(kl_iv v, const int n) { return vshlq_s32(v, vdupq_n_s32(n)); }
KL_INLINE kl_fv kl_fv_cvt_iv(kl_iv v) { return vcvtq_f32_s32(v); }
KL_INLINE kl_fv kl_fv_load(const float *p) { return vld1q_f32(p); }
KL_INLINE void kl_fv_store(float *p, kl_fv v) { vst1q_f32(p, v); }

/* w6-q32gemm additions (km_lanes.h) */

KL_INLINE kl_iv kl_iv_set1(int32_t s) { return vdupq_n_s32(s); }
KL_INLINE kl_iv kl_iv_xor(kl_iv a, kl_iv b) { return veorq_s32(a, b); }
KL_INLINE kl_iv kl_iv_bitbytes(kl_iv h, int s, uint8_t v) {
    const uint32x4_t lo = vshlq_u32(vreinterpretq_u32_s32(h), vdupq_n_s32(-s)); /* bits s.. of each lane at bit 0 */
    static const uint8_t idx[16] = {0, 0, 0, 0, 4, 4, 4, 4, 8, 8, 8, 8, 12, 12, 12, 12};
    const uint8x16_t b0 = vqtbl1q_u8(vreinterpretq_u8_u32(lo), vld1q_u8(idx)); /* byte 0 x 4 */
    const uint8x16_t set = vtstq_u8(b0, vreinterpretq_u8_u32(vdupq_n_u32(0x08040201u))); /* byte j: bit j */
    return vreinterpretq_s32_u8(vandq_u8(set, vdupq_n_u8(v)));
}
KL_INLINE float kl_f32_f16(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(h))), 0);
}
KL_INLINE kl_fv kl_fv_f16s(const uint8_t *p, int64_t stride, int n) {
    uint16_t v[4] = {0, 0, 0, 0};
    for (int c = 0; c < 4 && c < n; c++) memcpy(&v[c], p + c * stride, 2);
    return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(v)));
}
KL_INLINE kl_fv kl_fv_unmagic(kl_iv v) { return vsubq_f32(vreinterpretq_f32_s32(v), vdupq_n_f32(KL_MAGIC_F)); }
KL_INLINE void kl_q32_seeds(int32_t *out, const int8_t *qs, const int off) {
    for (int k = 0; k < 2; k++) {
        const int32x4_t s4 = vpaddlq_s16(vpaddlq_s8(vld1q_s8(qs + 16 * k))); /* the 4 sums of 4 quants */
        vst1q_s32(out + 4 * k, vsubq_s32(vdupq_n_s32(KL_MAGIC_I), vmulq_n_s32(s4, off)));
    }
}
KL_INLINE int32_t kl_q32_xsum(const int8_t *qs) {
    return vaddlvq_s16(vaddq_s16(vpaddlq_s8(vld1q_s8(qs)), vpaddlq_s8(vld1q_s8(qs + 16))));
}

#endif /* KM_LANES_NEON_H */
