/* attention/ggmlfa_kq_split_ref.c — km_attention_kq_f16kv_ggmlfa_split2__ref and km_attention_kq_f16kv_ggmlfa_split4__ref:
 * the scalar oracles of contracts attention_kq.f16kv.ggml_fa_split2.v1 and attention_kq.f16kv.ggml_fa_split4.v1.
 *
 * attention_kq.f16kv.ggml_fa.v1 (Q16 = f16(q) unscaled, each score f32(dot) * scale, the AVX-512 build's score dot)
 * as llama.cpp computes it on 2 / 4 threads: a decoded row whose KV view is 512 cells or more (positions from 256
 * on) has its keys split in 2 / 4 ranges, each with its own online softmax, merged in order, exactly as
 * attention.f16kv.ggml_fa_split2.v1 / split4.v1 (attention_ggmlfa_split_ref.h, here with q scale 1 and the score
 * scale `scale`). The same composition on llama.cpp's AVX2 build (attention_kq.f16kv.ggml_fa_dot32_split2.v1) gives
 * that build's logits bit for bit (tests/fixtures/families_avx2_t2). The split count is the contract's, not the
 * caller's thread count: results do not depend on (ith, nth).
 */
#include "attention_ggmlfa_split_ref.h"

void km_attention_kq_f16kv_ggmlfa_split2__ref(float *y, const float *q, const void *k_cache, const void *v_cache,
        int64_t M, int64_t Hq, int64_t Hkv, int64_t D, int64_t C, int64_t pos, float scale, int64_t window, int ith,
        int nth) {
    km_fa_split_ref(y, q, k_cache, v_cache, M, Hq, Hkv, C, D, pos, 1.0f, scale, window, 2, ith, nth);
}

void km_attention_kq_f16kv_ggmlfa_split4__ref(float *y, const float *q, const void *k_cache, const void *v_cache,
        int64_t M, int64_t Hq, int64_t Hkv, int64_t D, int64_t C, int64_t pos, float scale, int64_t window, int ith,
        int nth) {
    km_fa_split_ref(y, q, k_cache, v_cache, M, Hq, Hkv, C, D, pos, 1.0f, scale, window, 4, ith, nth);
}
