/* kv_append/q8_0_avx512.c — km_kv_append_q8_0__avx512, km_kv_append_q8_0_rotk__avx512, km_kv_append_q8_0_rotv__avx512:
 * contracts kv_append.q8_0.rne.v1, kv_append.q8_0.rot_k.v1, kv_append.q8_0.rot_v.v1.
 *
 * Instantiations of the family body kv_append/kv_append_q8_body.h (byte-identical to the ref entry points of
 * kv_append/q8_0_ref.c for every (ith, nth), and so to the other ISAs' instantiations) on the AVX-512 F/BW/VL/DQ lanes (16-lane zmm vectors).
 */
#include "km_lanes_avx512.h"
#include "kv_append_q8_body.h"

void km_kv_append_q8_0__avx512(void *cache, const float *x, int64_t M, int64_t H, int64_t D, int64_t C, int64_t pos,
        int ith, int nth);
void km_kv_append_q8_0_rotk__avx512(void *cache, const float *x, int64_t M, int64_t H, int64_t D, int64_t C,
        int64_t pos, int ith, int nth);
void km_kv_append_q8_0_rotv__avx512(void *cache, const float *x, int64_t M, int64_t H, int64_t D, int64_t C,
        int64_t pos, int ith, int nth);

void km_kv_append_q8_0__avx512(void *cache, const float *x, int64_t M, int64_t H, int64_t D, int64_t C, int64_t pos,
        int ith, int nth) {
    kkq_append(cache, x, M, H, D, C, pos, 0, ith, nth);
}

void km_kv_append_q8_0_rotk__avx512(void *cache, const float *x, int64_t M, int64_t H, int64_t D, int64_t C,
        int64_t pos, int ith, int nth) {
    kkq_append(cache, x, M, H, D, C, pos, kfw_rot_k(D), ith, nth);
}

void km_kv_append_q8_0_rotv__avx512(void *cache, const float *x, int64_t M, int64_t H, int64_t D, int64_t C,
        int64_t pos, int ith, int nth) {
    kkq_append(cache, x, M, H, D, C, pos, KFW_ROT_V, ith, nth);
}
