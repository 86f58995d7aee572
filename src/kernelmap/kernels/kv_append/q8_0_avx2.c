/* kv_append/q8_0_avx2.c — km_kv_append_q8_0__avx2, km_kv_append_q8_0_rotk__avx2, km_kv_append_q8_0_rotv__avx2:
 * contracts kv_append.q8_0.rne.v1, kv_append.q8_0.rot_k.v1, kv_append.q8_0.rot_v.v1.
 *
 * Instantiations of the family body kv_append/kv_append_q8_body.h (byte-identical to the ref entry points of
 * kv_append/q8_0_ref.c for every (ith, nth), and so to the other ISAs' instantiations) on the AVX2/FMA lanes (8-lane ymm vectors).
 */
#include "km_lanes_avx2.h"
#include "kv_append_q8_body.h"

void km_kv_append_q8_0__avx2(void *cache, const float *x, int64_t M, int64_t H, int64_t D, int64_t C, int64_t pos,
        int ith, int nth);
void km_kv_append_q8_0_rotk__avx2(void *cache, const float *x, int64_t M, int64_t H, int64_t D, int64_t C,
        int64_t pos, int ith, int nth);
void km_kv_append_q8_0_rotv__avx2(void *cache, const float *x, int64_t M, int64_t H, int64_t D, int64_t C,
        int64_t pos, int ith, int nth);

void km_kv_append_q8_0__avx2(void *cache, const float *x, int64_t M, int64_t H, int64_t D, int64_t C, int64_t pos,
        int ith, int nth) {
    kkq_append(cache, x, M, H, D, C, pos, 0, ith, nth);
}

void km_kv_append_q8_0_rotk__avx2(void *cache, const float *x, int64_t M, int64_t H, int64_t D, int64_t C,
        int64_t pos, int ith, int nth) {
    kkq_append(cache, x, M, H, D, C, pos, kfw_rot_k(D), ith, nth);
}

void km_kv_append_q8_0_rotv__avx2(void *cache, const float *x, int64_t M, int64_t H, int64_t D, int64_t C,
        int64_t pos, int ith, int nth) {
    kkq_append(cache, x, M, H, D, C, pos, KFW_ROT_V, ith, nth);
}
