/* attention/ggmlfa_q8kv_neon.c — km_attention_(kq_)q8_0kv_rot_ggmlfa__neon: contracts attention.q8_0kv_rot.ggml_fa.v1,
 * attention_kq.q8_0kv_rot.ggml_fa.v1
 * (the rotated forms only: no policy selects the plain ones, whose maps have no ARM variants).
 *
 * Instantiations of the family body attention/ggmlfa_q8kv_body.h (byte-identical to the ref entry points of
 * attention/ggmlfa_q8kv_ref.c for every (ith, nth) and M, and so to the other ISAs' instantiations) on the
 * NEON lanes (4-lane q registers).
 */
#include "km_lanes_neon.h"
#include "ggmlfa_q8kv_body.h"

void km_attention_q8_0kv_rot_ggmlfa__neon(float *y, const float *q, const void *k_cache, const void *v_cache, int64_t M,
        int64_t Hq, int64_t Hkv, int64_t D, int64_t C, int64_t pos, float scale, int64_t window, int ith, int nth);

void km_attention_kq_q8_0kv_rot_ggmlfa__neon(float *y, const float *q, const void *k_cache, const void *v_cache, int64_t M,
        int64_t Hq, int64_t Hkv, int64_t D, int64_t C, int64_t pos, float scale, int64_t window, int ith, int nth);

void km_attention_q8_0kv_rot_ggmlfa__neon(float *y, const float *q, const void *k_cache, const void *v_cache, int64_t M,
        int64_t Hq, int64_t Hkv, int64_t D, int64_t C, int64_t pos, float scale, int64_t window, int ith, int nth) {
    kfq_attention(y, q, k_cache, v_cache, M, Hq, Hkv, D, C, pos, scale, window, 0, 1, ith, nth);
}

void km_attention_kq_q8_0kv_rot_ggmlfa__neon(float *y, const float *q, const void *k_cache, const void *v_cache, int64_t M,
        int64_t Hq, int64_t Hkv, int64_t D, int64_t C, int64_t pos, float scale, int64_t window, int ith, int nth) {
    kfq_attention(y, q, k_cache, v_cache, M, Hq, Hkv, D, C, pos, scale, window, 1, 1, ith, nth);
}
