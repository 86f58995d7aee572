/* attention/ggmlfa_kq_dot32_split_ref.c — km_attention_kq_f16kv_ggmlfa_dot32_split2__ref: the scalar oracle of
 * contract attention_kq.f16kv.ggml_fa_dot32_split2.v1.
 *
 * attention_kq.f16kv.ggml_fa_dot32.v1 (Q16 = f16(q) unscaled, each score f32(dot) * scale with the AVX2 build's
 * 32-partial dot) as llama.cpp's build without AVX-512 computes it on 2 threads: a decoded row whose KV view is
 * 512 cells or more (positions from 256 on) has its keys split in 2 ranges, each with its own online softmax,
 * merged as attention.f16kv.ggml_fa_split2.v1 states (attention_ggmlfa_split_ref.h, here with q scale 1 and the
 * score scale `scale`). The split count is the contract's, not the caller's thread count: results do not depend on
 * (ith, nth).
 */
#include "ggmlfa_dot_ref.h"
#define KM_FA_DOT km_fa_dot32_ref
#include "attention_ggmlfa_split_ref.h"

void km_attention_kq_f16kv_ggmlfa_dot32_split2__ref(float *y, const float *q, const void *k_cache,
        const void *v_cache, int64_t M, int64_t Hq, int64_t Hkv, int64_t D, int64_t C, int64_t pos, float scale,
        int64_t window, int ith, int nth) {
    km_fa_split_ref(y, q, k_cache, v_cache, M, Hq, Hkv, C, D, pos, 1.0f, scale, window, 2, ith, nth);
}
