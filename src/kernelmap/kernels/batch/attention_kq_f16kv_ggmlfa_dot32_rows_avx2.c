/* batch/attention_kq_f16kv_ggmlfa_dot32_rows_avx2.c — km_attention_kq_f16kv_ggmlfa_dot32_rows__avx2:
 * the batch phase's per-row attention_kq of contract attention_kq.f16kv.ggml_fa_dot32.v1.
 * km_rows_attention (rows_body.h) calls km_attention_kq_f16kv_ggmlfa_dot32__avx2 once per row with M = 1 and the
 * row's position and KV slot, so every row is bit-identical with the decode path of its sequence.
 */
#include "rows_body.h"

void km_attention_kq_f16kv_ggmlfa_dot32__avx2(float *y, const float *q, const void *k_cache, const void *v_cache,
        int64_t M, int64_t Hq, int64_t Hkv, int64_t D, int64_t C, int64_t pos, float scale, int64_t window,
        int ith, int nth); /* the called map's call_abi */

void km_attention_kq_f16kv_ggmlfa_dot32_rows__avx2(float *y, const float *q, const void *k_cache, const void *v_cache,
        int64_t M, int64_t Hq, int64_t Hkv, int64_t D, int64_t C, const int64_t *positions,
        const int64_t *slots, float scale, int64_t window, int ith, int nth) {
    km_rows_attention(km_attention_kq_f16kv_ggmlfa_dot32__avx2, 2, y, q, k_cache, v_cache, M, Hq, Hkv, D, C, positions,
        slots, scale, window, ith, nth);
}
