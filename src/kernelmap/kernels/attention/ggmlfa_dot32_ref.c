/* attention/ggmlfa_dot32_ref.c — km_attention_f16kv_ggmlfa_dot32__ref: the scalar oracle of contract
 * attention.f16kv.ggml_fa_dot32.v1.
 *
 * Op, layouts, ring cells and partition: as attention.f16kv.ggml_fa.v1 (ggmlfa_ref.c).
 * Numerics: bit for bit llama.cpp's CPU flash attention as its x86 build *without AVX-512* computes it
 * (GGML_AVX2 / FMA / F16C on, GGML_AVX512 off: what llama.cpp builds for an AVX2-only CPU such as AMD Zen 3),
 * one query row at a time, f16 K and V, Q scaled before the attention with kq_scale 1. Every rounding is
 * attention.f16kv.ggml_fa.v1's but the score dot's, which is ggml_vec_dot_f16 on 8-float lanes:
 *   s_j = dot(K_j, Q16): element i (i < D32 = D rounded down to 32) goes to partial (i mod 32) by fmaf in
 *     increasing i; P[l] = (A0[l] + A2[l]) + (A1[l] + A3[l]) with Aa[l] = partial(8a + l), l < 8; then
 *     T[l] = P[l] + P[l+4] (l < 4) and s = (T[0] + T[1]) + (T[2] + T[3]); elements D32 .. D-1 are added one
 *     by one in double to (double)s (each product formed in float) and the total rounded to float
 *   (km_fa_dot32_ref, ggmlfa_dot_ref.h). The two builds' dots differ in the last bits for most keys, so llama.cpp's
 * logits depend on the CPU it was built for; this contract lets any CPU reproduce the AVX2 build (policy
 * llama-cpu-avx2), as attention.f16kv.ggml_fa.v1 reproduces the AVX-512 build.
 * Established against llama.cpp 0.3.36 built with GGML_AVX512=OFF on its own attention inputs
 * (tests/fixtures/llama_ops_avx2, tests/kernels/test_ops_vs_llama.py).
 */
#include "km_common.h"
#include "attention_ggmlfa_part.h"
#include "ggmlfa_dot_ref.h"
#define KM_FA_DOT km_fa_dot32_ref
#include "attention_ggmlfa_ref_body.h"

void km_attention_f16kv_ggmlfa_dot32__ref(float *y, const float *q, const void *k_cache, const void *v_cache,
        int64_t M, int64_t Hq, int64_t Hkv, int64_t D, int64_t C, int64_t pos, float scale,
        int64_t window, int ith, int nth) {
    const km_half *kc = (const km_half *)k_cache; /* [Hkv][C][D] */
    const km_half *vc = (const km_half *)v_cache; /* [Hkv][C][D] */
    const int64_t group = Hq / Hkv;
    int64_t lo, hi;
    km_fa_part(M, Hq, pos, window, ith, nth, &lo, &hi);
    for (int64_t it = lo; it < hi; it++) {
        const int64_t m = it / Hq, h = it % Hq, kvh = h / group;
        const int64_t p = pos + m;
        const int64_t j0 = (window > 0 && p - window + 1 > 0) ? p - window + 1 : 0;
        km_half q16[KM_FA_DMAX]; /* [D] */
        km_fa_ref_q16(q16, q + it * D, scale, D);
        km_fa_ref_row(y + it * D, q16, kc + kvh * C * D, vc + kvh * C * D, D, C, j0, p, 1.0f);
    }
}
