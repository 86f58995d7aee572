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
 * Memory hints: kl_prefetch_l1(p), kl_prefetch_l2(p), kl_prefetch_nt(p) (data read once: x86 prefetchnta, ARM
 * PLDL1STRM; a decode GEMV's weights, which the next step reads only after ~250 MB of others).
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
 * ---- K-quant blocks ----
 * 256-value superblocks of q2_K, q3_K, q4_K, q5_K, q6_K against q8_K activations, exact in int32.
 * Value e of a block has an integer code q(e) (q2_K 0..3, q3_K -4..3, q4_K 0..15, q5_K 0..31, q6_K
 * 0..63: the 6-bit code, its -32 offset is kl_kqi_seed's) and a sub-block scale sc(e) (entry e / 16 of the
 * block's 16-entry scale table: q2_K's 4-bit scales, q3_K's signed 6-bit scales, q6_K's int8 scales;
 * q4_K/q5_K's eight 6-bit scales each repeated for two entries). Contract lane l (0..7) of a block
 * holds the values e = 32c + 4l + i (c < 8, i < 4) — the int32 lane of llama.cpp's x86 vec_dot.
 *   KL_KQ_Q2_K .. KL_KQ_Q6_K      format codes (compile-time constants); KL_KQ_WBLK(fmt) bytes per block
 *   kl_kqs kl_kqs_load(blk, fmt)  the block's 16-entry scale table (ISA layout)
 *   kl_kqw; kl_kqw_load(&w, blk, s, fmt, h)  values 128h .. 128h + 127 of the block unpacked: codes and
 *                                 their scales from s (ISA layout; h a compile-time constant)
 *   kl_kqi                        int32 partial sums (ISA layout); kl_kqi_zero()
 *   kl_kqi_seed(s, x, fmt)        q6_K: lane l = -32 * (sc[2l] * bsums[2l] + sc[2l+1] * bsums[2l+1]) (llama.cpp's
 *                                 placement of the offset; sc the scale table, bsums of q8_K block x); else 0
 *   kl_kqi_dot(acc, &w, xq, fmt)  acc + sc(e) * q(e) * xq[e - 128h] for the 128 values e of w (xq: the
 *                                 half's 128 activation quants), each added into e's contract lane
 *   kl_kqi_dott(acc, &w, xq, fmt) the same products added to acc's total only (their split over the lanes is
 *                                 the ISA's: such an accumulator is read with kl_kqi_store4 only)
 *   kl_kqi_lanes(acc) -> kl_f8    lane l = (float) exact sum of acc's partials of contract lane l
 *   kl_kqi_lanes2(a, b) -> kl_f8x2  (kl_kqi_lanes(a), kl_kqi_lanes(b)) as a row pair
 *   kl_f8x2_set2(a, b)            every lane of row A = a, of row B = b; kl_f8x2_mul(a, b) lane-wise a * b
 *   kl_kqi_store4(p, acc)         four int32 at p whose sum is the exact total of acc
 *   kl_f8_cvt_sum4(t)             lane j = (float) (t[j][0] + t[j][1] + t[j][2] + t[j][3]), int32 t[8][4] exact
 *   kl_kqm; kl_kqm_load(mn, fmt)  the sub-block mins of 8 columns (uint8 mn, KL_KQ_NMIN(fmt) per column) prepared
 *   kl_f8_kq_imin(&m, x, fmt)     lane j = (float) imin of column j: q2_K sum_{k<16} mn[16j + k] * bsums[k];
 *                                 q4_K/q5_K sum_{k<8} mn[8j + k] * (bsums[2k] + bsums[2k+1]) (x the q8_K block; exact)
 *   kl_f8_kq_minlanes(blk, x, fmt)  the min lanes of llama.cpp's q2_K / q4_K vec_dot: q2_K lane l = (float)
 *                                 (mn[2l] * bsums[2l] + mn[2l+1] * bsums[2l+1]) (16 mins per 16 values); q4_K
 *                                 lane k < 4 = (float) (mn[2k] * ps[2k] + mn[2k+1] * ps[2k+1]), ps[j] = bsums[2j] +
 *                                 bsums[2j+1], lanes 4-7 = +0 (blk the weight block, x the q8_K block; exact)
 *   kl_f8_f16x8(p)                the 8 IEEE halves p[0..7] converted exactly
 *   kl_kqw_codes(out, &w, fmt)    the 128 codes q(e) of w as int8 at out, in value order
 *   kl_f8_cvt_i8(p, off)          lane i = (float) (p[i] - off) for 8 int8 at p (exact)
 *   kl_h2f(h)                     the f32 of IEEE half h (exact)
 * Scalar f32 steps (one IEEE operation each, the same on every ISA): kl_f32_mul(a, b), kl_f32_add(a, b),
 *   kl_f32_sub(a, b), kl_f32_fma(a, b, c) (a * b + c with one rounding).
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
 * ---- flash attention (attention/ggmlfa_body.h) ----
 *   kl_fv_rt16(v)                  lane-wise f32(f16_rne(v)): v rounded to an IEEE half, nearest even (overflow to
 *                                  inf, subnormals kept), widened back exactly
 *   kl_fv_expf(v)                  lane-wise expf: lanes with |x| < 0x1.6p6 by glibc's expf operations (x86 FMA
 *                                  build: double kd = fma(x, 32/ln2, 0x1.8p52), r = fma(32/ln2, x, -(kd - 0x1.8p52)),
 *                                  s = kl_expf_tab[k mod 32] + (k << 47), y = fma(fma(r, C0, C1), r*r, fma(r, C2, 1))
 *                                  * s, rounded to f32); all other lanes (large, inf, NaN) call the C library's expf
 *   kl_fv_prefix_max(v, m)         lane l = the running maximum before lane l: start m, then lanes 0 .. l-1 in order, a
 *                                  lane replacing it only when strictly greater (so of equal values the earlier;
 *                                  lanes of v not NaN)
 *   kl_fold16x16(s, p)             s[k] (k < 16) = the 16 floats p[16k .. 16k+15] folded P[l] += P[l+8] (l < 8),
 *                                  then + 4, + 2, s = P[0] + P[1] (ggml_vec_dot_f16's reduce; p 64-byte aligned)
 * Scalar steps of a body (a scale, a double-precision tail) are plain C, one IEEE operation each: the
 * sources build with -ffp-contract=off, so they are the same operation on every ISA.
 * ---- w5-kq additions (K-quant blocks) ----
 *   kl_kqw_loadf(&w, blk, s, fmt, h)  exactly kl_kqw_load's kl_kqw (same codes, scales, layout), built with fewer
 *                                 vector instructions where the ISA can (AVX-512: q3_K/q5_K's high bits by mask
 *                                 registers, q6_K's by one shift per register); the bodies' unpack
 *   kl_kq_imin1(blk, x, fmt)      int32: the exact min sum of one weight block against q8_K block x: q2_K
 *                                 sum_{k<16} (blk[k] >> 4) * bsums[k]; q4_K/q5_K sum_{j<8} mn[j] * (bsums[2j] +
 *                                 bsums[2j+1]) (mn the 6-bit mins of the scale table at blk + 4)
 */
#ifndef KM_LANES_H
#define KM_LANES_H

#include "km_common.h"
#include "km_expf.h"

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

/* K-quant block formats (kl_kq* ops) and their bytes per 256-value block. */
#define KL_KQ_Q2_K 2
#define KL_KQ_Q3_K 3
#define KL_KQ_Q4_K 4
#define KL_KQ_Q5_K 5
#define KL_KQ_Q6_K 6
#define KL_KQ_WBLK(fmt) \
    ((fmt) == KL_KQ_Q2_K ? 84 : (fmt) == KL_KQ_Q3_K ? 110 : (fmt) == KL_KQ_Q4_K ? 144 : (fmt) == KL_KQ_Q5_K ? 176 : 210)

/* Sub-block mins per block of the formats with mins (q2_K: one per 16 values; q4_K, q5_K: per 32). */
#define KL_KQ_NMIN(fmt) ((fmt) == KL_KQ_Q2_K ? 16 : 8)

KL_INLINE float kl_f32_mul(float a, float b) { return a * b; }
KL_INLINE float kl_f32_add(float a, float b) { return a + b; }
KL_INLINE float kl_f32_sub(float a, float b) { return a - b; }
KL_INLINE float kl_f32_fma(float a, float b, float c) { return __builtin_fmaf(a, b, c); }

/* (float)v for |v| < 2^22 by the 1.5 * 2^23 trick: bits(v + 0x4B400000) - 12582912.0f is exact. */
#define KL_MAGIC_I 0x4B400000
#define KL_MAGIC_F 12582912.0f

/* kl_expf_tab and the KL_EXPF_* constants: km_expf.h (shared with the scalar km_expf) */

/* w5-forks-lin additions (interface; implemented in km_lanes_avx2.h, km_lanes_avx512.h, km_lanes_neon.h):
 * 16-lane contract vectors (the 16 partials of the kernelmap-order float linears, p[k mod 16]):
 *   kl_f16v                        16 f32 lanes (ISA layout); kl_f16v_zero() kl_f16v_set1(s) kl_f16v_loadu(p)
 *   kl_f16v_loadn(p, n)            the first n (0 <= n <= 16) floats at p, lanes >= n = +0; reads nothing past p + n
 *   kl_f16v_mul(a, b) kl_f16v_fma(a, b, c)   lane-wise, one rounding each (fma fused)
 *   kl_f16v_cvt_i8(p)              16 int8 at p as f32 (exact)
 *   kl_f16v_fold(v)                s[l] = v[l] + v[l + 8] (l < 8), then kl_f8_fold(s): every step an f32 add
 *   kl_f16v_add(a, b)              lane-wise f32 add
 *   kl_f16v_load_f16(p) kl_f16v_load_bf16(p)   16 contiguous halves / bf16 at p as f32 (exact)
 *   kl_f16v_dpbf16(acc, w, x)      vdpbf16ps on 32 bf16 pairs: lanes 0-7 = kl_f8_dpbf16(acc lanes 0-7, w, x),
 *                                  lanes 8-15 = kl_f8_dpbf16(acc lanes 8-15, w + 16, x + 16)
 *   kl_q32_isum8x2(w, p, fmt, n)   row pairs of 32-element blocks: lane c (c < n <= 8) of A / B = (float) the exact
 *                                  int32 sum of all 32 products of w[c]'s row A / B against activation block p[c]
 *                                  (|sum| < 2^20); lanes >= n = +0 (w[c], p[c] not read)
 *   kl_kq_imin4(p, mn, x)          four int32 at p whose sum is sum_{j<8} mn_j * (bsums[2j] + bsums[2j+1]), mn_j
 *                                  byte j of the uint64 mn (q4_K/q5_K's eight mins), x the q8_K block (exact)
 */

/* w5-forks-attn additions
 *   kl_fv_fold_halves(v)           the KL_FV_LANES lanes P folded by halves: P[l] += P[l + KL_FV_LANES / 2]
 *                                  (l < KL_FV_LANES / 2), then + KL_FV_LANES / 4, ..., + 1; returns P[0] (each an
 *                                  f32 add: the tail of a pairwise fold whose earlier steps the body does with
 *                                  kl_fv_add, as attention/attention_online_body.h's 32-partial dot)
 *   kl_fv_round_away(v)            lane-wise C roundf: to the nearest integer, halves away from zero (exact; an
 *                                  f32; lanes finite)
 */

/* w6-gemm additions (column-lane int32, for the prefill GEMM bodies; implemented in km_lanes_avx2.h,
 * km_lanes_avx512.h and km_lanes_neon.h):
 * lane c of a vector is output column c, so no integer or float operation of these crosses columns.
 *   KL_IV                          defined when the lanes header provides these
 *   kl_iv                          KL_FV_LANES int32 lanes; kl_iv_zero() kl_iv_load(p) kl_iv_store(p, v) (p aligned
 *                                  to the vector's size) kl_iv_add(a, b) kl_iv_mullo(a, b) (low 32 bits)
 *   kl_iv_loadu(p)                 kl_iv_load at any address (KL_IV_LOADU: the 16-lane header, for the c16 bodies)
 *   kl_iv_cvt_u8(p)                KL_FV_LANES bytes at p zero-extended to the int32 lanes (with KL_IV_LOADU)
 *   kl_iv_cvt_i8w(p)               (with KL_IV_LOADU) KL_FV_LANES int8 at p: lane = the value sign-extended to
 *                                  16 bits in the low half, 0 in the high half (an operand of kl_iv_dpw)
 *   kl_iv_dpw(acc, a, b)           (with KL_IV_LOADU) acc + lo16(a) * lo16(b) + hi16(a) * hi16(b) per lane (int16
 *                                  halves signed, wrapping int32: vpdpwssd)
 *   kl_iv_code3(lo, s, hb, c)      (with KL_IV_LOADU) per byte: bits s, s + 1 of lo's byte as bits 0-1, bit c of hb's
 *                                  byte as bit 2, bits 3-7 zero (a 3-bit code, 0..7)
 *   kl_iv_sums4(p)                 (with KL_IV_LOADU) lane k = p[4k] + p[4k+1] + p[4k+2] + p[4k+3] (int8 at p, exact)
 *   kl_iv_neg16(v)                 (with KL_IV_LOADU) each int16 half negated (wrapping)
 *   kl_iv_cvt_i8p(p)               (with KL_IV_LOADU) 2 * KL_FV_LANES int8 at p: lane c = (p[2c], p[2c + 1])
 *                                  sign-extended to its low and high int16 halves
 *   kl_iv_lo16(v)                  (with KL_IV_LOADU) each lane's high int16 half cleared
 *   kl_iv_mul16(v, k)              (with KL_IV_LOADU) each int16 half times the constant k (low 16 bits)
 *   kl_iv_and8(v, m) kl_iv_srl32(v, n)   (with KL_IV_LOADU) every byte & m; 32-bit lanes shifted right by n
 *   kl_iv_nib_merge(a, b)          (with KL_IV_LOADU) per byte: a's bits 0-3 and b's bits 4-7
 *   kl_iv_dp4(acc, w, x)           lane l + sum_{i<4} u8(byte 4l + i of w) * s8(x[i]), x 4 int8 (the same 4 for
 *                                  every lane); exact for codes <= 127 (without VNNI a pair sum is int16)
 *   kl_iv_dp2w(acc, w, x)          lane l + i16(low half of w's lane l) * x[0] + i16(high half) * x[1], x 2
 *                                  int16 (the same for every lane); exact
 *   kl_iv_gather32(p, stride, n)   lane c < n = the 4 bytes at p + c * stride (stride * KL_FV_LANES < 2^31);
 *                                  lanes >= n = 0 and not read
 *   kl_iv_nib_lo(v) kl_iv_nib_hi(v)   every byte's low / high nibble (0..15)
 *   kl_iv_dp4s(acc, w, x, s)       lane l + s_l * sum_{i<4} u8(byte 4l + i of w) * s8(x[i]), s_l the int16 held in
 *                                  both halves of s's lane l; exact for codes <= 127 (pair sums are int16)
 *   kl_iv_or(a, b) kl_iv_sll32(v, n)   bitwise or; 32-bit lanes shifted left by n
 *   kl_iv_srl_and8(v, n, m)        32-bit lanes shifted right by n, then every byte & m
 *   kl_fv_cvt_iv(v)                (float) lane, rounded to nearest even as C's int-to-float conversion
 *   kl_fv_load(p) kl_fv_store(p, v)   KL_FV_LANES floats at p, aligned to the vector's size
 */

/* w6-q32gemm additions (column-lane int32 for the 32-element prefill GEMM, linear/q32_gemm_body.h; implemented in
 * km_lanes_avx2.h, km_lanes_avx512.h (kl_q32_seeds, kl_q32_xsum, kl_f32_f16 shared in km_lanes_x86.h) and
 * km_lanes_neon.h next to the w6-gemm names, defined when KL_IV is):
 *   kl_iv_set1(s)                  every lane = the int32 s
 *   kl_iv_xor(a, b)                bitwise exclusive or
 *   kl_iv_bitbytes(h, s, v)        byte j (j < 4) of lane c = v if bit s + j of lane c of h is set, else 0
 *                                  (s a multiple of 4, 0 <= s <= 28; v a byte)
 *   kl_fv_unmagic(v)               (float)(lane - KL_MAGIC_I) for lanes seeded with KL_MAGIC_I whose offset is
 *                                  below 2^22 in magnitude: bits(lane) - KL_MAGIC_F, exact
 *   kl_f32_f16(p)                  the IEEE half at p as f32 (exact)
 *   kl_fv_f16s(p, stride, n)       lane c < n = the IEEE half at p + c * stride as f32 (exact; reads the 4 bytes
 *                                  there, stride * KL_FV_LANES < 2^31); lanes >= n = +0 and not read
 *   kl_q32_seeds(out, qs, off)     the 8 int32 out[l] = KL_MAGIC_I - off * (qs[4l] + ... + qs[4l + 3]) of 32
 *                                  int8 quants qs (off 0 or a power of two <= 128; out aligned to 32 bytes)
 *   kl_q32_xsum(qs)                the int32 sum of the 32 int8 quants at qs
 *   KL_IV_DP4U                     defined when the lanes header also provides (optional; km_lanes_avx2.h):
 *   kl_iv_dp4u(acc, w, x)          lane l + sum_{i<4} s8(byte 4l + i of w) * u8(x[i]), x 4 bytes (the same 4 for
 *                                  every lane); exact when |w| * 255 * 2 < 2^15 (without VNNI a pair sum is int16)
 *   KL_IV_P16                      defined when the lanes header also provides (optional; the headers whose dot is
 *                                  a multiply-add pair, not one instruction: km_lanes_avx2.h, km_lanes_avx512.h
 *                                  without VNNI) 16-bit partial dots, so a body sums several 4-value dots of one
 *                                  scale in int16 and widens once:
 *   kl_iv_p16(acc, w, x)           int16 half h of lane l: acc's + u8(byte 4l + 2h of w) * s8(x[2h]) + u8(byte
 *                                  4l + 2h + 1) * s8(x[2h + 1]), x 4 int8 (the same 4 for every lane); wrapping
 *                                  int16 adds: exact while every partial stays in int16 (the body's bound)
 *   kl_iv_madd16(acc, a, b)        lane l + i16(a.lo) * i16(b.lo) + i16(a.hi) * i16(b.hi) (the halves of lane l)
 *   kl_iv_lut16(v, t)              (optional; km_lanes_avx512.h) every byte b of v (each < 16) replaced by t[b], t 16
 *                                  bytes (a 4-bit code's value table: linear/iq4_nl_body.h)
 *   KL_IV_ROWS4                    defined when the lanes header also provides (optional; km_lanes_avx2.h, where
 *                                  gathers are slow):
 *   kl_iv_rows4(out, p, stride, n) out[t] (t < 4) lane c = the 4 bytes at p + c * stride + 4t; lanes c >= n read
 *                                  row n - 1 (never past the last row; kl_iv_gather32 gives 0 there)
 *   KL_IV_R8                       defined when the lanes header also provides (optional; km_lanes_avx2.h,
 *                                  km_lanes_avx512.h: linear/q32_gemm_body.h's panels from the q32_r8 layout) the
 *                                  ops below; lane c < 8 reads the q32_r8 group at p (row c), lane c >= 8 (16-lane
 *                                  headers) row c - 8 of the group at p + gstride (gstride 0: the same group):
 *   kl_iv_r8_nib(out, p, gstride)  out[l] (l < 8) lane c = bytes 4l..4l+3 of the 32 at p + 32 (c mod 8): a tile's
 *                                  nibble bytes (p: its 8 x 32) as column lanes
 *   kl_iv_r8_bit(h, gstride, l)    byte k of lane c = 16 * bit (c mod 8) of h[4l + k] (h: a fifth-bit plane)
 *   kl_fv_r8_f16(p, gstride)       lane c = the IEEE half p[c mod 8] (of 8 at p) as f32 (exact)
 */

/* q32_r8 additions (optional; km_lanes_x86.h, so AVX2 and AVX-512; linear/q32_r8_body.h needs them):
 *   KL_R8                          defined when the lanes header provides the ops below
 *   kl_b32                         32 bytes; kl_b32_load(p) (no alignment)
 *   kl_f8_bcast_mem(p)             every lane = *p, as a broadcast load (no vector ALU op)
 *   kl_r8_lo(p) kl_r8_hi(p)        byte i = the low / high nibble of p's byte i
 *   kl_r8_code(nib, h, r)          byte i = nib's byte i (<= 15) + 16 * bit r of h's byte i (r: compile-time 0..7)
 *   kl_r8_dot(c, x, seed)          kl_f8 lane l = (float)(seed[l] + the exact int32 sum of c[4l+i] * x[4l+i], i < 4)
 *                                  - KL_MAGIC_F (c unsigned <= 31, x int8; the seed of kl_q32_seeds: exact floats)
 *   kl_r8_dot0(c, x)               kl_f8 lane l = (float) the exact int32 sum of c[4l+i] * x[4l+i], i < 4 (c unsigned
 *                                  <= 31, x int8; no seed: the formats without a code offset)
 *   kl_r8_sums2(nib, x0, x1, base0, base1, &s0, &s1)   the 8 rows' whole-block sums of both blocks of a q32_r8 tile
 *                                  without fifth bits (nib: its 8 x 32 nibble bytes, row r's at 32 r; x0, x1: the two
 *                                  activation blocks' 32 int8 quants): kl_f8 lane r of s0 = (float)(base0 + the exact
 *                                  int32 sum of (nib[32r + i] & 15) * x0[i], i < 32), of s1 the same with the high
 *                                  nibbles, x1 and base1 (int32 bases with |base + sum| < 2^24: exact floats)
 * q32_r8 row pairs (optional on top of KL_R8; km_lanes_avx512.h): rows r, r + 1 of a tile in one vector
 *   KL_R8P                         defined when the lanes header provides the ops below
 *   kl_b64                         two rows' 32 bytes (low half row r); kl_b64_load(p) (64 bytes, no alignment),
 *                                  kl_b64_dup(p) (the 32 bytes at p in both halves)
 *   kl_r8p_lo(p) kl_r8p_hi(p)      kl_r8_lo / kl_r8_hi per byte
 *   kl_r8p_code(nib, h, r)         half q: kl_r8_code(nib's half, h's half, r + q) (r even, compile-time)
 *   kl_r8p_dot(c, x, seed) kl_r8p_dot0(c, x)   kl_r8_dot / kl_r8_dot0 per half
 *   kl_f8r                         two rows' kl_f8 (lanes 0-7 row r, 8-15 row r + 1): kl_f8r_zero, kl_f8r_fma,
 *                                  kl_f8r_loadu / kl_f8r_storeu (16 floats: row r's 8, then row r + 1's),
 *                                  kl_f8r_pair(t, r) (t[r] in the low lanes, t[r + 1] in the high), kl_f8r_lo / hi
 */

/* w6-q32gemv additions (the 32-element decode, M = 1; implemented in km_lanes_avx512.h only: the bodies test
 * the macros and keep their other path elsewhere):
 *   KL_Q32P                        defined when the lanes header provides the row-pair ops below
 *   kl_f8p                         two rows' kl_f8 lanes (lane order the header's own: AVX-512 interleaves them,
 *                                  lane 2l = A[l], 2l + 1 = B[l]); kl_f8p_zero()
 *   kl_f8p_join(a, b) kl_f8p_lo(v) kl_f8p_hi(v)   build from / split into the two kl_f8
 *   kl_f8p_fma(a, b, c)            lane-wise fma (fused); kl_f8p_fma_s(a, s, c): b = the float *s in every lane
 *   kl_f8p_mul_f8(a, x)            A's and B's lane l of a times x[l] (one rounding)
 *   kl_f8p_bcast(v, j)             A's lanes = A's v[j], B's lanes = B's v[j] (j < 8)
 *   kl_f8p_first_lo(v) kl_f8p_first_hi(v)   A's v[0], B's v[0]
 *   kl_f8p_f16s(a, b, stride, n)   A's lane j < n = the f16 at a + j * stride as f32, B's lane j the one at
 *                                  b + j * stride (others +0; reads 4 bytes there); kl_f8p_f16s2(..., &d, &m): d as
 *                                  kl_f8p_f16s, m the same at a + 2, b + 2 (the min formats' d and m from one read)
 *   kl_q32p kl_q32p_load(a, b, fmt); kl_q32p_dot(w, p, fmt) -> kl_f8p: kl_q32_dot of block a (A's lanes) and of
 *                                  block b (B's lanes) against the same activation block p (exact)
 *   KL_Q32C                        defined when the lanes header provides kl_q32c_dot16, kl_fv_f16s
 *   kl_q32c_dot16(w, wrow, n, p, fmt)   lane c < n <= KL_FV_LANES (16) = (float) the exact int32 sum of the 32
 *                                  products (code - off) * x of the block at w + c * wrow against activation block p
 *                                  (fmt q4_0 or q4_1: no fifth bits); columns >= n repeat column n - 1
 *   kl_fv_f16s(p, stride, n)       (the w6-q32gemm op above)
 */

/* s8-kq additions (the repacked q2_K / q4_K decode, M = 1; implemented in km_lanes_avx512.h only: the body
 * tests the macro and keeps kqr_tile for the other lanes):
 *   KL_KQ1                         defined when the lanes header provides the ops below
 *   kl_kq1x; kl_kq1x_load(&x, xb, fmt)   q8_K block xb's 256 quants re-laid in kl_kq1_isum's code order
 *   kl_kq1i                        int32 partials of one column's block (ISA layout)
 *   kl_kq1_isum(blk, &x, fmt, hs) -> kl_kq1i   partials summing to the block's exact isum = sum_e sc(e) * q(e) * x(e)
 *                                  (fmt q2_K or q4_K); writes 16 bytes at hs for kl_f8_kq1_imin8 (q2_K the scale
 *                                  bytes, q4_K the 8 unpacked scales then the 8 unpacked mins)
 *   kl_f8_kq1_sum8(t) -> kl_f8     lane j = (float) the exact total of t[j] (j < 8)
 *   kl_f8_kq1_imin8(hs, xb, fmt) -> kl_f8   lane j = (float) column j's imin from its 16 bytes at hs + 16j
 *                                  (kl_f8_kq_imin's sums; exact)
 *   kl_f8_kq1_f16pair(p, &lo, &hi) lanes j: the IEEE halves in the low and the high 16 bits of uint32 p[j] (exact)
 * and q3_K's decode dot (km_lanes_avx512.h only; linear/q_k_vecdot_ggml_body.h's kqv_row1_q3):
 *   KL_KQ3X                        defined when the lanes header provides the ops below
 *   kl_kq3x; kl_kq3x_load(&c, xb)  q8_K block xb's activation-side term of kl_kqi_dot_q3x (once per block)
 *   kl_kqw_load_q3x(&w, blk, s, h) q3_K's half h unpacked for kl_kqi_dot_q3x (ISA layout)
 *   kl_kqi_dot_q3x(acc, &w, xq, &c, h)  exactly kl_kqi_dot's contract lanes for q3_K's half h (exact)
 */

#endif /* KM_LANES_H */
