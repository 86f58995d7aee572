/* attention/ggmlfa_kq_avx2.c — km_attention_kq_f16kv_ggmlfa__avx2: contract attention_kq.f16kv.ggml_fa.v1 (Q16 = f16(q), each score f32(dot) * scale).
 *
 * An instantiation of the family body attention/ggmlfa_body.h (numerics, schedule and why every element sees
 * the contract's roundings are there) on the AVX2 + FMA + F16C lanes: byte-identical to km_attention_kq_f16kv_ggmlfa__ref
 * (ggmlfa_kq_ref.c), and so to every other ISA's variant, for every (ith, nth) and M.
 */
#include "km_lanes_avx2.h"

#define KFA_KB 32     /* keys per block */
#define KFA_SG 1      /* items per score pass (8 ymm of partials each) */
#define KFA_NV 4      /* vectors per item in a VKQ chunk (32 columns; 2 -> 4: ~10% on Zen 3, the fma -> f16 -> f32 chains need more in flight) */
#define KFA_NV8 1     /* the same for row pairs (unused: no pairs) */
#define KFA_NV2 8     /* vectors per item for groups of 1-2 items (64 columns; decode on 2 threads, 2 heads each) */
#define KFA_PAIRS 0   /* row pairs */
#define KFA_FUSED 0   /* next block's scores inside the VKQ pass */
#define KFA_EXPF_HOOK 0 /* no expf test hook (the plain ggml_fa unit has it) */
#include "ggmlfa_body.h"

void km_attention_kq_f16kv_ggmlfa__avx2(float *y, const float *q, const void *k_cache, const void *v_cache,
        int64_t M, int64_t Hq, int64_t Hkv, int64_t D, int64_t C, int64_t pos, float scale, int64_t window, int ith,
        int nth) {
    kfa_attention(y, q, k_cache, v_cache, M, Hq, Hkv, D, C, pos, 1.0f, scale, window, 1, ith, nth);
}
