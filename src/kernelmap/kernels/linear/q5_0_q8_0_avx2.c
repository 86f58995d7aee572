/* linear/q5_0_q8_0_avx2.c — km_linear_q5_0_q8_0__avx2: linear.q5_0.q8_0.f32.v1, AVX2 + FMA + F16C.
 *
 * Op, layouts and numerics exactly as linear/q5_0_q8_0_ref.c: bit-exact with
 * km_linear_q5_0_q8_0__ref and byte-identical to every other variant. Per-block exact int32 sums
 * (maddubs + madd on the unsigned quants, minus 16 * sum x; x quants in [-127, 127]); t_b =
 * fp16(w.d) * fp16(x.d); partial b mod 8 updated with one FMA in increasing b; then the fixed tree
 * ((p0+p4)+(p2+p6))+((p1+p5)+(p3+p7)). A tail of K/32 mod 8 blocks runs the same code with its
 * block count a compile-time constant and zero lanes, which add exactly +0. Partition: output
 * columns n (km_part over N); 4 columns at a time; each activation row runs against the 4 weight
 * rows while they sit in L1.
 */
#include "km_common.h"
#include "km_simd.h"

void km_linear_q5_0_q8_0__avx2(float *y, const void *w, const void *x, int64_t M, int64_t N, int64_t K,
                               int ith, int nth) {
    km_avx2_q32_linear(y, w, x, M, N, K, ith, nth, 22, km_avx2_u_q5_0, 16);
}
