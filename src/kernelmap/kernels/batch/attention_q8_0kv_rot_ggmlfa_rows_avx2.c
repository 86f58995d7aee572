/* batch/attention_q8_0kv_rot_ggmlfa_rows_avx2.c — km_attention_q8_0kv_rot_ggmlfa_rows__avx2,
 * km_attention_kq_q8_0kv_rot_ggmlfa_rows__avx2: the batch phase's per-row attention of contracts
 * attention.q8_0kv_rot.ggml_fa.v1 and attention_kq.q8_0kv_rot.ggml_fa.v1.
 * km_rows_attention_rb (rows_body.h) calls km_attention_(kq_)q8_0kv_rot_ggmlfa__avx2 once per row with M = 1
 * and the row's position and KV slot (a slot: Hkv * C rows of D / 32 q8_0 blocks), so every row is
 * bit-identical with the decode path of its sequence.
 */
#include "rows_body.h"

void km_attention_q8_0kv_rot_ggmlfa__avx2(float *y, const float *q, const void *k_cache, const void *v_cache,
        int64_t M, int64_t Hq, int64_t Hkv, int64_t D, int64_t C, int64_t pos, float scale, int64_t window,
        int ith, int nth); /* the called maps' call_abi */
void km_attention_kq_q8_0kv_rot_ggmlfa__avx2(float *y, const float *q, const void *k_cache, const void *v_cache,
        int64_t M, int64_t Hq, int64_t Hkv, int64_t D, int64_t C, int64_t pos, float scale, int64_t window,
        int ith, int nth);

void km_attention_q8_0kv_rot_ggmlfa_rows__avx2(float *y, const float *q, const void *k_cache, const void *v_cache,
        int64_t M, int64_t Hq, int64_t Hkv, int64_t D, int64_t C, const int64_t *positions,
        const int64_t *slots, float scale, int64_t window, int ith, int nth);
void km_attention_kq_q8_0kv_rot_ggmlfa_rows__avx2(float *y, const float *q, const void *k_cache, const void *v_cache,
        int64_t M, int64_t Hq, int64_t Hkv, int64_t D, int64_t C, const int64_t *positions,
        const int64_t *slots, float scale, int64_t window, int ith, int nth);

void km_attention_q8_0kv_rot_ggmlfa_rows__avx2(float *y, const float *q, const void *k_cache, const void *v_cache,
        int64_t M, int64_t Hq, int64_t Hkv, int64_t D, int64_t C, const int64_t *positions,
        const int64_t *slots, float scale, int64_t window, int ith, int nth) {
    km_rows_attention_rb(km_attention_q8_0kv_rot_ggmlfa__avx2, KM_ROWS_Q8_0_ROW(D), y, q, k_cache, v_cache, M,
        Hq, Hkv, D, C, positions, slots, scale, window, ith, nth);
}

void km_attention_kq_q8_0kv_rot_ggmlfa_rows__avx2(float *y, const float *q, const void *k_cache, const void *v_cache,
        int64_t M, int64_t Hq, int64_t Hkv, int64_t D, int64_t C, const int64_t *positions,
        const int64_t *slots, float scale, int64_t window, int ith, int nth) {
    km_rows_attention_rb(km_attention_kq_q8_0kv_rot_ggmlfa__avx2, KM_ROWS_Q8_0_ROW(D), y, q, k_cache, v_cache, M,
        Hq, Hkv, D, C, positions, slots, scale, window, ith, nth);
}
