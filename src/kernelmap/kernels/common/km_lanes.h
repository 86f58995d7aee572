/* km_lanes.h — the lanes interface: what every ISA's lanes header provides to the family bodies.
 *
 * A kernel family body (e.g. linear/q32_ggml_body.h) fixes its contract's arithmetic order once and is
 * written only against the names below; it contains no intrinsics and no ISA conditionals. An ISA
 * variant of a provider is an instantiation: one .c file that includes one lanes header
 * (km_lanes_<isa>.h), sets the body's schedule parameters (tile rows, unroll, prefetch distance) and
 * includes the body. Because every float operation below is one IEEE operation with a fixed operand
 * order (fma is fused, nothing else is; sources build with -ffp-contract=off), two instantiations of one
 * body give the same bits on every CPU, x86 or ARM.
 *
 * Lanes headers: km_lanes_avx2.h (AVX2+FMA+F16C), km_lanes_avx512.h (AVX-512 F/BW/VL/DQ, with VNNI
 * dot products when compiled with -mavx512vnni), km_lanes_neon.h (armv8-a AdvSIMD, with SDOT when
 * compiled with +dotprod). Each defines KL_ISA_NAME and the following.
 *
 * Contract vectors of 8 f32 lanes (the accumulator lanes of llama.cpp's x86 dot products):
 *   kl_f8                          8 f32 lanes
 *   kl_f8_zero() kl_f8_set1(s) kl_f8_loadu(p) kl_f8_storeu(p, v)
 *   kl_f8_add(a, b) kl_f8_sub(a, b) kl_f8_mul(a, b)     one rounding each, lane-wise
 *   kl_f8_fma(a, b, c)             a * b + c with one rounding, lane-wise
 *   kl_f8_bcast(v, j)              every lane = lane j of v (j a compile-time constant after unrolling)
 *   kl_f8_f16s(p, stride, n)       n <= 8 IEEE halves at p, p + stride, ... converted exactly; lanes >= n = +0
 *   kl_f8_fold(v)                  ((v0 + v4) + (v2 + v6)) + ((v1 + v5) + (v3 + v7)), each an f32 add
 * Row pairs (two contract vectors, rows A and B, in whatever register layout suits the ISA):
 *   kl_f8x2 kl_f8x2_zero() kl_f8x2_fma(a, b, c) kl_f8x2_loadu(p) kl_f8x2_storeu(p, v) (16 floats, ISA order)
 *   kl_f8x2_f16s(pa, pb, stride, n)  the halves of rows A and B (as kl_f8_f16s)
 *   kl_f8x2_mul_f8(d, x)          (dA * x, dB * x)
 *   kl_f8x2_bcast(v, j)            (every lane of A = A[j], of B = B[j])
 *   kl_f8x2_bcast_mem(p, j)        the same from a vector stored with kl_f8x2_storeu at p
 *   kl_f8x2_fold(v, &a, &b)        kl_f8_fold of A and of B
 * 32-element block dot products (legacy GGML formats against q8_0 activations), exact in int32:
 *   KL_Q32_Q5_0, KL_Q32_Q8_0      format codes (compile-time constants)
 *   kl_q32xb                       one activation block prepared for the dots (ISA layout)
 *   kl_q32xb_prep(p, x, fmt)       prepare q8_0 block x (quants in [-127, 127])
 *   kl_q32w kl_q32w_load(blk, fmt) one weight block; kl_q32_dot(w, p, x, fmt) -> kl_f8 whose lane l is
 *                                  (float) sum_{i<4} w[4l+i] * x[4l+i] (exact: |sum| < 2^16)
 *   kl_q32w2 kl_q32w2_load(a, b, fmt); kl_q32_dot2(w, p, x, fmt) -> kl_f8x2: the same for rows A, B
 * Memory hints: kl_prefetch_l1(p), kl_prefetch_l2(p).
 *
 * ---- native-width f32 (elementwise) ----
 * For contracts with no cross-lane float operation (each output element is its own chain): the body
 * walks rows with the ISA's own vector width, so the width cannot change a bit.
 *   KL_FV_LANES                    lanes of kl_fv: 8 (avx2), 16 (avx512), 4 (neon); divides 16
 *   kl_fv                          KL_FV_LANES f32 lanes; kl_fvm a lane mask (ISA layout)
 *   kl_fv_zero() kl_fv_set1(s) kl_fv_loadu(p) kl_fv_storeu(p, v)
 *   kl_fv_loadn(p, n)              the first n (0 <= n <= KL_FV_LANES) floats at p, lanes >= n = +0; reads
 *                                  nothing past p + n; kl_fv_storen(p, v, n) writes only lanes < n
 *   kl_fv_add(a, b) kl_fv_sub(a, b) kl_fv_mul(a, b) kl_fv_div(a, b)   one rounding each, lane-wise
 *   kl_fv_fma(a, b, c) = a * b + c, kl_fv_fms(a, b, c) = a * b - c, kl_fv_fnma(a, b, c) = c - a * b:
 *                                  each with one rounding
 *   kl_fv_neg(v) kl_fv_abs(v)      the sign bit flipped / cleared (NaNs too, payload kept)
 *   kl_fv_min(a, b) = a < b ? a : b, kl_fv_max(a, b) = a > b ? a : b   (so a NaN in a gives b, a NaN in
 *                                  b gives b, and of two equal zeros b: x86's minps/maxps)
 *   kl_fv_round(v)                 to the nearest integer, ties to even (an f32)
 *   kl_fv_exp2i(v)                 2^v for integer-valued lanes -126 <= v <= 127 (bits (v + 127) << 23)
 *   kl_fv_dup_even(v) kl_fv_dup_odd(v)   lanes 2i and 2i + 1 = v[2i] / v[2i + 1]
 *   kl_fv_cmp_lt/le/ge/eq(a, b)    ordered compares (false with a NaN); kl_fv_isnan(v) -> kl_fvm
 *   kl_fv_blend(a, b, m)           lane = m ? b : a; kl_fvm_bits(m): bit i = lane i of m
 *   kl_fv_hmax(v)                  the largest lane (lanes not NaN; of equal zeros either one)
 * ---- f64 partials (reductions) ----
 *   kl_d16                         16 f64 partials (ISA layout)
 *   kl_d16_zero()
 *   kl_d16_add_sq(acc, j, v)       partial j + l += (double)(v[l] * v[l]) for l < KL_FV_LANES: the square
 *                                  rounded to f32, widened exactly, one f64 add; j a compile-time multiple
 *                                  of KL_FV_LANES below 16
 *   kl_d16_fold(acc)               p[j] += p[j + 8] (j < 8), then + 4, + 2, + 1: returns p[0]
 * ---- int8 (quantized activations) ----
 *   kl_fv_cvt_i8(p)                KL_FV_LANES int8 at p as f32 (exact)
 *   kl_fv_store_i8x32(p, v, s)     32 int8 at p: the lanes of the 32 / KL_FV_LANES vectors v[] in order, each
 *                                  rounded to the nearest integer, ties to even (the default rounding mode,
 *                                  as the refs' rintf), and saturated to [-128, 127] (lanes must not be NaN
 *                                  or reach 2^31); s NULL, or s[0] / s[1] = the exact int32 sums of rounded
 *                                  lanes 0..15 / 16..31 (the stored values when nothing saturated)
 *   kl_q5_0_i8(out, blk)           the 32 weight integers (code - 16) of q5_0 block blk as int8, in
 *                                  element order
 * ---- f16 conversion ----
 *   kl_fv_load_f16(p)              KL_FV_LANES IEEE halves at p as f32 (exact)
 *   kl_fv_store_f16(p, v)          KL_FV_LANES halves: v rounded to nearest even, overflow to inf,
 *                                  subnormals kept (a NaN lane stores some quiet NaN: bodies that fix
 *                                  NaN bits handle them themselves)
 *   kl_fv_f16_lut(t, v, clamp, neg)   lane = the f32 of the half t[min(h & 0x7FFF, clamp) + (h >> 15) * neg],
 *                                  h = the bits of v rounded to a half (nearest even); t must be readable
 *                                  for one uint16 past its last index (x86 gathers 32 bits)
 * Scalar steps of these bodies (a mean, a scale, libm's cosf/sinf) are plain C, one IEEE operation each:
 * the sources build with -ffp-contract=off, so they are the same operation on every ISA.
 */
#ifndef KM_LANES_H
#define KM_LANES_H

#include "km_common.h"

#define KL_INLINE static inline __attribute__((always_inline))

#define KL_Q32_Q5_0 5
#define KL_Q32_Q8_0 8

/* Bytes per weight block of a 32-element format. */
#define KL_Q32_WBLK(fmt) ((fmt) == KL_Q32_Q8_0 ? 34 : 22)

/* Offset of the stored code of a 32-element format (stored code - offset = the signed weight). */
#define KL_Q32_OFF(fmt) ((fmt) == KL_Q32_Q5_0 ? 16 : 0)

/* (float)v for |v| < 2^22 by the 1.5 * 2^23 trick: bits(v + 0x4B400000) - 12582912.0f is exact. */
#define KL_MAGIC_I 0x4B400000
#define KL_MAGIC_F 12582912.0f

#endif /* KM_LANES_H */
