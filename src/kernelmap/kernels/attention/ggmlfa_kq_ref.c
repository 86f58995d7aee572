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
#include <math.h>

#include "km_common.h"
#include "attention_ggmlfa_part.h"
#include "ggmlfa_dot_ref.h"

#define KM_FAKQ_DMAX 512

void km_attention_kq_f16kv_ggmlfa__ref(float *y, const float *q, const void *k_cache, const void *v_cache,
        int64_t M, int64_t Hq, int64_t Hkv, int64_t D, int64_t C, int64_t pos, float scale,
        int64_t window, int ith, int nth) {
    const km_half *kc = (const km_half *)k_cache; /* [Hkv][C][D] */
    const km_half *vc = (const km_half *)v_cache; /* [Hkv][C][D] */
    const int64_t group = Hq / Hkv;
    int64_t lo, hi;
    km_fa_part(M, Hq, pos, window, ith, nth, &lo, &hi);
    km_half q16[KM_FAKQ_DMAX]; /* [D] */
    float vkq[KM_FAKQ_DMAX];   /* [D] f16 values held in f32 */
    for (int64_t it = lo; it < hi; it++) {
        const int64_t m = it / Hq, kvh = (it % Hq) / group, p = pos + m;
        const int64_t j0 = (window > 0 && p - window + 1 > 0) ? p - window + 1 : 0;
        for (int64_t d = 0; d < D; d++) {
            q16[d] = km_fp32_to_fp16(q[it * D + d]);
            vkq[d] = 0.0f;
        }
        float big_m = -INFINITY, big_s = 0.0f;
        for (int64_t j = j0; j <= p; j++) {
            const float s = km_fa_dot_ref(kc + (kvh * C + j % C) * D, q16, D) * scale;
            float ms = 1.0f, vs = 1.0f;
            if (s > big_m) {
                ms = expf(big_m - s);
                big_m = s;
                for (int64_t d = 0; d < D; d++) vkq[d] = km_fp16_to_fp32(km_fp32_to_fp16(vkq[d] * ms));
            } else {
                vs = expf(s - big_m);
            }
            const km_half *vr = vc + (kvh * C + j % C) * D;
            for (int64_t d = 0; d < D; d++) {
                vkq[d] = km_fp16_to_fp32(km_fp32_to_fp16(fmaf(km_fp16_to_fp32(vr[d]), vs, vkq[d])));
            }
            big_s = fmaf(big_s, ms, vs);
        }
        const float inv = big_s == 0.0f ? 0.0f : 1.0f / big_s;
        for (int64_t d = 0; d < D; d++) y[it * D + d] = vkq[d] * inv;
    }
}
