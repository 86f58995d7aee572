/* linear/q8_0_q8_0_avx512.c — km_linear_q8_0_q8_0__avx512: linear.q8_0.q8_0.f32.v1, AVX-512 F/BW/VL/DQ.
 *
 * Op, layouts and numerics exactly as linear/q8_0_q8_0_ref.c: bit-exact with
 * km_linear_q8_0_q8_0__ref and byte-identical to every other variant. Per-block exact int32 sums
 * (abs/sign trick into maddubs + madd; x quants in [-127, 127]); t_b = fp16(w.d) * fp16(x.d);
 * partial b mod 8 updated with one FMA in increasing b; then the fixed tree
 * ((p0+p4)+(p2+p6))+((p1+p5)+(p3+p7)). A tail of K/32 mod 8 blocks runs the same code with its
 * block count a compile-time constant and zero lanes, which add exactly +0. Partition: output
 * columns n (km_part over N); register tiles of 4 weight rows x 4 activation rows (4 x 1 in
 * decode); weight quants are unpacked once per tile; block scales come from masked loads and 16-bit
 * permutes.
 */
#include "km_common.h"
#include "km_simd.h"

void km_linear_q8_0_q8_0__avx512(float *y, const void *w, const void *x, int64_t M, int64_t N, int64_t K,
                                 int ith, int nth) {
    km_avx512_q32_linear(y, w, x, M, N, K, ith, nth, 34, km_avx2_w_q8_0, 0);
}
