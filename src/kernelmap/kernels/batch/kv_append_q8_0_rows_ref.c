/* batch/kv_append_q8_0_rows_ref.c — km_kv_append_q8_0_rotk_rows__ref, km_kv_append_q8_0_rotv_rows__ref:
 * the batch phase's per-row kv_append of contracts kv_append.q8_0.rot_k.v1 and kv_append.q8_0.rot_v.v1.
 * km_rows_kv_append_rb (rows_body.h) calls km_kv_append_q8_0_rotk__ref / km_kv_append_q8_0_rotv__ref once
 * per row with M = 1 and the row's position and KV slot (a slot: H * C rows of D / 32 q8_0 blocks), so every
 * row is bit-identical with the decode path of its sequence.
 */
#include "rows_body.h"

void km_kv_append_q8_0_rotk__ref(void *cache, const float *x, int64_t M, int64_t H, int64_t D, int64_t C,
        int64_t pos, int ith, int nth); /* the called maps' call_abi */
void km_kv_append_q8_0_rotv__ref(void *cache, const float *x, int64_t M, int64_t H, int64_t D, int64_t C,
        int64_t pos, int ith, int nth);

void km_kv_append_q8_0_rotk_rows__ref(void *cache, const float *x, int64_t M, int64_t H, int64_t D, int64_t C,
        const int64_t *positions, const int64_t *slots, int ith, int nth);
void km_kv_append_q8_0_rotv_rows__ref(void *cache, const float *x, int64_t M, int64_t H, int64_t D, int64_t C,
        const int64_t *positions, const int64_t *slots, int ith, int nth);

void km_kv_append_q8_0_rotk_rows__ref(void *cache, const float *x, int64_t M, int64_t H, int64_t D, int64_t C,
        const int64_t *positions, const int64_t *slots, int ith, int nth) {
    km_rows_kv_append_rb(km_kv_append_q8_0_rotk__ref, KM_ROWS_Q8_0_ROW(D), cache, x, M, H, D, C, positions, slots,
        ith, nth);
}

void km_kv_append_q8_0_rotv_rows__ref(void *cache, const float *x, int64_t M, int64_t H, int64_t D, int64_t C,
        const int64_t *positions, const int64_t *slots, int ith, int nth) {
    km_rows_kv_append_rb(km_kv_append_q8_0_rotv__ref, KM_ROWS_Q8_0_ROW(D), cache, x, M, H, D, C, positions, slots,
        ith, nth);
}
