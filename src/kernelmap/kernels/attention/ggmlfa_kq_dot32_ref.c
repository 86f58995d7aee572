/* attention/ggmlfa_kq_dot32_ref.c — km_attention_kq_f16kv_ggmlfa_dot32__ref: the scalar oracle of contract
 * attention_kq.f16kv.ggml_fa_dot32.v1.
 *
 * attention_kq.f16kv.ggml_fa.v1 (ggmlfa_kq_ref.c states it: Q16 = f16(q) unscaled, each score f32(dot) * scale,
 * the online softmax) with the score dot of llama.cpp's build without AVX-512 (its AVX2 build): ggml_vec_dot_f16
 * on 8-float lanes, partial i mod 32 by fmaf for i below D rounded down to 32, P = (a0 + a2) + (a1 + a3),
 * T[l] = P[l] + P[l + 4], (T0 + T1) + (T2 + T3), the D % 32 tail in double (km_fa_dot32_ref, the score dot of
 * attention.f16kv.ggml_fa_dot32.v1). Constraints as attention_kq.f16kv.ggml_fa.v1. Results do not depend on
 * (ith, nth).
 */
#include "ggmlfa_dot_ref.h"
#define KM_FA_DOT km_fa_dot32_ref
#include "attention_ggmlfa_kq_ref.h"

void km_attention_kq_f16kv_ggmlfa_dot32__ref(float *y, const float *q, const void *k_cache, const void *v_cache,
        int64_t M, int64_t Hq, int64_t Hkv, int64_t D, int64_t C, int64_t pos, float scale,
        int64_t window, int ith, int nth) {
    km_fa_kq_ref(y, q, k_cache, v_cache, M, Hq, Hkv, D, C, pos, scale, window, ith, nth);
}
