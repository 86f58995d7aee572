/* attention/ggmlfa_kq_ref.c — km_attention_kq_f16kv_ggmlfa__ref: the scalar oracle of contract
 * attention_kq.f16kv.ggml_fa.v1.
 *
 * Op: causal GQA attention exactly as attention/ggmlfa_ref.c (q f32 [M, Hq*D], head-major f16 caches
 * [Hkv][C][D] with key j in cell j mod C (the ring layout of ggmlfa_ref.c), y f32 [M, Hq*D], window,
 * partition attention_ggmlfa_part.h) except where the scale
 * applies: llama.cpp's flash attention with kq_scale = `scale` (what its Llama, Qwen 2/3 and Qwen3-MoE
 * graphs pass) rounds Q to f16 unscaled and multiplies each score: Q16[i] = f16_rne(q[i]);
 * s_j = f32(dot(K_j, Q16) * scale), the dot folded in ggml_vec_dot_f16's order (partial i mod 64 by
 * fmaf for i < D rounded down to 64, partials folded (A0+A2)+(A1+A3), then +8, +4, +2 lanes and
 * P0 + P1; the D%64 tail added in double, each product in float); then the same online softmax:
 * if s_j > M: ms = expf(M - s_j), M = s_j, VKQ = f16(VKQ * ms), vs = 1; else vs = expf(s_j - M);
 * VKQ[d] = f16(fmaf(V_j[d], vs, VKQ[d])); S = fmaf(S, ms, vs); y = VKQ * (S == 0 ? 0 : 1/S).
 * With scale a power of two the result equals contract attention.f16kv.ggml_fa.v1 except where
 * f16(q*scale) loses bits f16(q) keeps (subnormals), which is why this is its own contract.
 * Constraints: D a multiple of 16, D <= 512, Hq a multiple of Hkv. Results do not depend on (ith, nth).
 */
#include "attention_ggmlfa_kq_ref.h"

void km_attention_kq_f16kv_ggmlfa__ref(float *y, const float *q, const void *k_cache, const void *v_cache,
        int64_t M, int64_t Hq, int64_t Hkv, int64_t D, int64_t C, int64_t pos, float scale,
        int64_t window, int ith, int nth) {
    km_fa_kq_ref(y, q, k_cache, v_cache, M, Hq, Hkv, D, C, pos, scale, window, ith, nth);
}
