/* batch/kv_append_f16_rows_avx2.c — km_kv_append_f16_rows__avx2:
 * the batch phase's per-row kv_append of contract kv_append.f16.v1.
 * km_rows_kv_append (rows_body.h) calls km_kv_append_f16__avx2 once per row with M = 1 and the
 * row's position and KV slot, so every row is bit-identical with the decode path of its sequence.
 */
#include "rows_body.h"

void km_kv_append_f16__avx2(void *cache, const float *x, int64_t M, int64_t H, int64_t D, int64_t C,
        int64_t pos, int ith, int nth); /* the called map's call_abi */

void km_kv_append_f16_rows__avx2(void *cache, const float *x, int64_t M, int64_t H, int64_t D, int64_t C,
        const int64_t *positions, const int64_t *slots, int ith, int nth) {
    km_rows_kv_append(km_kv_append_f16__avx2, 2, cache, x, M, H, D, C, positions, slots, ith, nth);
}
