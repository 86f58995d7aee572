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
