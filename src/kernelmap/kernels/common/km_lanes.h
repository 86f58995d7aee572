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
 * 32-element block dot products (legacy GGML formats against q8_0 / q8_1 activations), exact in int32:
 *   KL_Q32_Q4_0 KL_Q32_Q4_1 KL_Q32_Q5_0 KL_Q32_Q5_1 KL_Q32_Q8_0   weight format codes (compile-time
 *                                  constants); the geometry macros below (block bytes, byte offsets of qs /
 *                                  qh / the min, code offset, activation block) are the formats' layouts
 *   kl_q32xb                       one activation block prepared for the dots (ISA layout)
 *   kl_q32xb_prep(p, qs, fmt)      prepare the 32 activation quants at qs (int8 in [-127, 127]) for
 *                                  weights of format fmt
 *   kl_q32w kl_q32w_load(blk, fmt) one weight block; kl_q32_dot(w, p, fmt) -> kl_f8 whose lane l is
 *                                  (float) sum_{i<4} w[4l+i] * x[4l+i] (exact: |sum| < 2^16), w the weight's
 *                                  integer (q4_0: nibble - 8, q5_0: code - 16, q4_1 / q5_1: the unsigned code)
 *   kl_q32w2 kl_q32w2_load(a, b, fmt); kl_q32_dot2(w, p, fmt) -> kl_f8x2: the same for rows A, B
 *   kl_f8_sum8(v)                  lane c = the sum of the eight lanes of v[c] (c < 8), for vectors whose
 *                                  lanes are integers with every partial sum below 2^24 (so exact)
 *   kl_q32_dot8(rows, off, p, fmt) lane c = (float) the exact int32 sum of all 32 products of the weight block at
 *                                  rows[c] + off (c < 8) against prepared activation block p (|sum| < 2^20)
 *   kl_q32_values8(blk, fmt, j)    lanes l = the integers of elements 8j + l of the block as f32 (exact)
 * Memory hints: kl_prefetch_l1(p), kl_prefetch_l2(p).
 *
 * ---- float formats ----
 * f16 / bf16 rows and the activation conversions llama.cpp pairs with them (IEEE half, bfloat16):
 *   kl_f8_load_f16(p) kl_f8_load_bf16(p)   8 contiguous halves / bf16 at p as f32 (exact)
 *   kl_f8_store_f16(p, v)          8 halves: v rounded to nearest even (vcvtps2ph imm 0: overflow to inf,
 *                                  subnormals kept, NaN quieted)
 *   kl_f8_store_bf16(p, v)         8 bf16: v rounded to nearest even on bit 16, NaN -> (bits >> 16) | 0x40
 *                                  (ggml_compute_fp32_to_bf16: no flush of subnormals)
 *   kl_f8_dpbf16(acc, w, x)        vdpbf16ps on 16 bf16 pairs: lane j = R(R(acc[j] + w[2j+1] * x[2j+1]) +
 *                                  w[2j] * x[2j]), each step one fused multiply-add rounded to nearest even
 *                                  with inputs (acc and the bf16 values) flushed to zero when subnormal
 *                                  (DAZ) and a result below 2^-126 in magnitude flushed to signed zero (FTZ)
 *   kl_f8_abs(v) kl_f8_max(a, b)   lane-wise |v| and max (exact); kl_f8_hmax(v) the largest lane (exact)
 *   kl_f8_store_i8(p, v)           8 int8 at p: lane values rounded to nearest even (|v| <= 127.5, no
 *                                  saturation needed); returns the exact int32 sum of the 8 stored values
 * Scalar steps of a body (a scale, a double-precision tail) are plain C, one IEEE operation each: the
 * sources build with -ffp-contract=off, so they are the same operation on every ISA.
 */
#ifndef KM_LANES_H
#define KM_LANES_H

#include "km_common.h"

#define KL_INLINE static inline __attribute__((always_inline))

#define KL_Q32_Q4_0 4
#define KL_Q32_Q4_1 41
#define KL_Q32_Q5_0 5
#define KL_Q32_Q5_1 51
#define KL_Q32_Q8_0 8

/* Bytes per weight block of a 32-element format. */
#define KL_Q32_WBLK(fmt) \
    ((fmt) == KL_Q32_Q8_0 ? 34 : (fmt) == KL_Q32_Q5_1 ? 24 : (fmt) == KL_Q32_Q5_0 ? 22 : (fmt) == KL_Q32_Q4_1 ? 20 : 18)

/* Byte offset of the quants (qs) in a weight block. */
#define KL_Q32_QS(fmt) \
    ((fmt) == KL_Q32_Q5_1 ? 8 : (fmt) == KL_Q32_Q5_0 ? 6 : (fmt) == KL_Q32_Q4_1 ? 4 : 2)

/* Byte offset of the fifth bits (qh, bit j = element j) in a weight block; -1: the format has none. */
#define KL_Q32_QH(fmt) ((fmt) == KL_Q32_Q5_0 ? 2 : (fmt) == KL_Q32_Q5_1 ? 4 : -1)

/* 1 for the formats with a min (value = d * code + m: q4_1, q5_1); their activations are q8_1. */
#define KL_Q32_HASMIN(fmt) ((fmt) == KL_Q32_Q4_1 || (fmt) == KL_Q32_Q5_1)

/* Offset of the stored code of a 32-element format (stored code - offset = the weight's integer). */
#define KL_Q32_OFF(fmt) ((fmt) == KL_Q32_Q5_0 ? 16 : (fmt) == KL_Q32_Q4_0 ? 8 : 0)

/* The activation block of a format: q8_0 (34 bytes: d, qs) or q8_1 (36 bytes: d, s = d * sum(qs), qs). */
#define KL_Q32_XBLK(fmt) (KL_Q32_HASMIN(fmt) ? 36 : 34)
#define KL_Q32_XQS(fmt) (KL_Q32_HASMIN(fmt) ? 4 : 2)

/* (float)v for |v| < 2^22 by the 1.5 * 2^23 trick: bits(v + 0x4B400000) - 12582912.0f is exact. */
#define KL_MAGIC_I 0x4B400000
#define KL_MAGIC_F 12582912.0f

#endif /* KM_LANES_H */
