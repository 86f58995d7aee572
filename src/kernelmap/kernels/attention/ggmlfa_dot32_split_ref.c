/* attention/ggmlfa_dot32_split_ref.c — km_attention_f16kv_ggmlfa_dot32_split2__ref: the scalar oracle of contract
 * attention.f16kv.ggml_fa_dot32_split2.v1.
 *
 * Op, layouts, ring cells and partition: as attention.f16kv.ggml_fa_split2.v1 (ggmlfa_split_ref.c).
 * Numerics: bit for bit llama.cpp's CPU flash attention as its x86 build *without AVX-512* (GGML_AVX2 / FMA /
 * F16C on, GGML_AVX512 off) computes it on 2 threads, one query row at a time, f16 K and V, Q scaled before the
 * attention with kq_scale 1: the 2-thread key split and f32 merge of ggml_fa_split2.v1 (from a 512-cell KV
 * view on; below it the one-row path), with every score dot the AVX2 build's 8-lane ggml_vec_dot_f16
 * (km_fa_dot32_ref, the dot of attention.f16kv.ggml_fa_dot32.v1). The two differences from llama.cpp's
 * AVX-512 1-thread order are independent: the split is ggml's thread scheduling (the same C code in both
 * builds), the dot its SIMD mapping, so this contract is their composition.
 * Established against llama.cpp 0.3.36 built with GGML_AVX512=OFF run with 2 threads
 * (tests/fixtures/llama_fa_avx2_t2: greedy tokens, top-1 and top-5 logits and perplexity over 512 positions,
 * past the 512-cell views where the split starts).
 */
#include "ggmlfa_dot_ref.h"
#define KM_FA_DOT km_fa_dot32_ref
#include "attention_ggmlfa_split_ref.h"

void km_attention_f16kv_ggmlfa_dot32_split2__ref(float *y, const float *q, const void *k_cache, const void *v_cache,
        int64_t M, int64_t Hq, int64_t Hkv, int64_t D, int64_t C, int64_t pos, float scale, int64_t window, int ith,
        int nth) {
    km_fa_split_ref(y, q, k_cache, v_cache, M, Hq, Hkv, C, D, pos, scale, 1.0f, window, 2, ith, nth);
}
