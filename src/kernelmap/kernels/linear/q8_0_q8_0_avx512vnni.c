/* linear/q8_0_q8_0_avx512vnni.c — km_linear_q8_0_q8_0__avx512vnni: linear.q8_0.q8_0.f32.v1, AVX-512 + VNNI.
 *
 * Op, layouts and numerics exactly as linear/q8_0_q8_0_ref.c: bit-exact with
 * km_linear_q8_0_q8_0__ref and byte-identical to every other variant. Per-block exact int32 sums
 * (vpdpbusd on w ^ 0x80, minus 128 * sum x; x quants in [-127, 127]); t_b = fp16(w.d) * fp16(x.d);
 * partial b mod 8 updated with one FMA in increasing b; then the fixed tree
 * ((p0+p4)+(p2+p6))+((p1+p5)+(p3+p7)). A tail of K/32 mod 8 blocks runs the same code with its
 * block count a compile-time constant and zero lanes, which add exactly +0. Partition: output
 * columns n (km_part over N). Body in linear/q32_vnni.h: each block's bytes 0..15 and 16..31 go to
 * separate zmm (four blocks per zmm), two chained vpdpbusd leave 4 lanes per block, and two
 * outputs share one two-level permute reduction; tiles of 4 weight rows x 4 activation rows
 * (pairs of weight rows in decode); activation rows re-laid once per tile; K > 8192 uses
 * km_avx512_q32_linear.
 */
#include "km_common.h"
#include "km_simd.h"
#include "q32_vnni.h"

void km_linear_q8_0_q8_0__avx512vnni(float *y, const void *w, const void *x, int64_t M, int64_t N, int64_t K,
                                     int ith, int nth) {
    km_q32v_linear(y, w, x, M, N, K, ith, nth, 34, 8, km_avx2_u_q8_0, 128);
}
