/* attention/ggmlfa_avx512.c — km_attention_f16kv_ggmlfa__avx512: contract attention.f16kv.ggml_fa.v1 (Q16 = f16(q * scale), scores unscaled).
 *
 * An instantiation of the family body attention/ggmlfa_body.h (numerics, schedule and why every element sees
 * the contract's roundings are there) on the AVX-512 F/BW/VL/DQ lanes: byte-identical to km_attention_f16kv_ggmlfa__ref
 * (ggmlfa_ref.c), and so to every other ISA's variant, for every (ith, nth) and M.
 */
#include "km_lanes_avx512.h"

#define KFA_KB 32     /* keys per block */
#define KFA_SG 4      /* items per score pass (4 zmm of partials each) */
#define KFA_NV 4      /* vectors per item in a VKQ chunk (64 columns) */
#define KFA_NV8 2     /* the same for groups of more than 4 items (32 columns) */
#define KFA_NV2 8     /* vectors per item for groups of 1-2 items (128 columns; decode on 2 threads, 2 heads each: Gemma 3 270M decode attention 0.61 -> 0.57 ms per step, Zen 5, in-process A/B) */
#define KFA_PAIRS 1   /* row pairs (up to 8 items per group) */
#define KFA_FUSED 1   /* next block's scores inside the VKQ pass (16-key blocks) */
#define KFA_EXPF_HOOK 1 /* export the expf test hook */
#include "ggmlfa_body.h"

void km_attention_f16kv_ggmlfa__avx512(float *y, const float *q, const void *k_cache, const void *v_cache,
        int64_t M, int64_t Hq, int64_t Hkv, int64_t D, int64_t C, int64_t pos, float scale, int64_t window, int ith,
        int nth) {
    kfa_attention(y, q, k_cache, v_cache, M, Hq, Hkv, D, C, pos, scale, 1.0f, window, 1, ith, nth);
}
