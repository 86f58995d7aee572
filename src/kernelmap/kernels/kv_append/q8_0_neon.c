/* kv_append/q8_0_neon.c — km_kv_append_q8_0_rotk__neon, km_kv_append_q8_0_rotv__neon: contracts
 * kv_append.q8_0.rot_k.v1, kv_append.q8_0.rot_v.v1 (the plain form has no ARM variant: no policy selects it).
 *
 * Instantiations of the family body kv_append/kv_append_q8_body.h (byte-identical to the ref entry points of
 * kv_append/q8_0_ref.c for every (ith, nth), and so to the other ISAs' instantiations) on the NEON lanes (4-lane q registers).
 */
#include "km_lanes_neon.h"
#include "kv_append_q8_body.h"

void km_kv_append_q8_0_rotk__neon(void *cache, const float *x, int64_t M, int64_t H, int64_t D, int64_t C,
        int64_t pos, int ith, int nth);
void km_kv_append_q8_0_rotv__neon(void *cache, const float *x, int64_t M, int64_t H, int64_t D, int64_t C,
        int64_t pos, int ith, int nth);

void km_kv_append_q8_0_rotk__neon(void *cache, const float *x, int64_t M, int64_t H, int64_t D, int64_t C,
        int64_t pos, int ith, int nth) {
    kkq_append(cache, x, M, H, D, C, pos, kfw_rot_k(D), ith, nth);
}

void km_kv_append_q8_0_rotv__neon(void *cache, const float *x, int64_t M, int64_t H, int64_t D, int64_t C,
        int64_t pos, int ith, int nth) {
    kkq_append(cache, x, M, H, D, C, pos, KFW_ROT_V, ith, nth);
}
