/* attention/ggmlfa_q8kv_avx512vnni.c — km_attention_(kq_)q8_0kv(_rot)_ggmlfa__avx512vnni: contracts attention.q8_0kv.ggml_fa.v1,
 * attention_kq.q8_0kv.ggml_fa.v1, attention.q8_0kv_rot.ggml_fa.v1, attention_kq.q8_0kv_rot.ggml_fa.v1.
 *
 * Instantiations of the family body attention/ggmlfa_q8kv_body.h (byte-identical to the ref entry points of
 * attention/ggmlfa_q8kv_ref.c for every (ith, nth) and M, and so to the other ISAs' instantiations) on the
 * AVX-512 F/BW/VL/DQ + VNNI lanes (16-lane zmm vectors; the score dots by vpdpbusd).
 */
#include "km_lanes_avx512.h"
#include "ggmlfa_q8kv_body.h"

void km_attention_q8_0kv_ggmlfa__avx512vnni(float *y, const float *q, const void *k_cache, const void *v_cache, int64_t M,
        int64_t Hq, int64_t Hkv, int64_t D, int64_t C, int64_t pos, float scale, int64_t window, int ith, int nth);

void km_attention_kq_q8_0kv_ggmlfa__avx512vnni(float *y, const float *q, const void *k_cache, const void *v_cache, int64_t M,
        int64_t Hq, int64_t Hkv, int64_t D, int64_t C, int64_t pos, float scale, int64_t window, int ith, int nth);

void km_attention_q8_0kv_rot_ggmlfa__avx512vnni(float *y, const float *q, const void *k_cache, const void *v_cache, int64_t M,
        int64_t Hq, int64_t Hkv, int64_t D, int64_t C, int64_t pos, float scale, int64_t window, int ith, int nth);

void km_attention_kq_q8_0kv_rot_ggmlfa__avx512vnni(float *y, const float *q, const void *k_cache, const void *v_cache, int64_t M,
        int64_t Hq, int64_t Hkv, int64_t D, int64_t C, int64_t pos, float scale, int64_t window, int ith, int nth);

void km_attention_q8_0kv_ggmlfa__avx512vnni(float *y, const float *q, const void *k_cache, const void *v_cache, int64_t M,
        int64_t Hq, int64_t Hkv, int64_t D, int64_t C, int64_t pos, float scale, int64_t window, int ith, int nth) {
    kfq_attention(y, q, k_cache, v_cache, M, Hq, Hkv, D, C, pos, scale, window, 0, 0, ith, nth);
}

void km_attention_kq_q8_0kv_ggmlfa__avx512vnni(float *y, const float *q, const void *k_cache, const void *v_cache, int64_t M,
        int64_t Hq, int64_t Hkv, int64_t D, int64_t C, int64_t pos, float scale, int64_t window, int ith, int nth) {
    kfq_attention(y, q, k_cache, v_cache, M, Hq, Hkv, D, C, pos, scale, window, 1, 0, ith, nth);
}

void km_attention_q8_0kv_rot_ggmlfa__avx512vnni(float *y, const float *q, const void *k_cache, const void *v_cache, int64_t M,
        int64_t Hq, int64_t Hkv, int64_t D, int64_t C, int64_t pos, float scale, int64_t window, int ith, int nth) {
    kfq_attention(y, q, k_cache, v_cache, M, Hq, Hkv, D, C, pos, scale, window, 0, 1, ith, nth);
}

void km_attention_kq_q8_0kv_rot_ggmlfa__avx512vnni(float *y, const float *q, const void *k_cache, const void *v_cache, int64_t M,
        int64_t Hq, int64_t Hkv, int64_t D, int64_t C, int64_t pos, float scale, int64_t window, int ith, int nth) {
    kfq_attention(y, q, k_cache, v_cache, M, Hq, Hkv, D, C, pos, scale, window, 1, 1, ith, nth);
}
