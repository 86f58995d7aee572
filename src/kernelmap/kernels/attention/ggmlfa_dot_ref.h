/* attention/ggmlfa_dot_ref.h — the score dot of llama.cpp's CPU flash attention (ggml_vec_dot_f16, AVX-512 build),
 * scalar: element i (i < D rounded down to 64) goes to partial i mod 64 by fmaf in increasing i (f16 x f16
 * products are exact in f32); partials fold P[l] = (A0[l] + A2[l]) + (A1[l] + A3[l]) (Aa[l] = partial 16a + l),
 * then P[l] += P[l+8], P[l] += P[l+4], P[l] += P[l+2], s = P[0] + P[1]; elements D64 .. D-1 are added one by
 * one in double to (double)s, each product formed in float, and the total rounded to float.
 * Shared by the ref oracles of contracts attention.f16kv.ggml_fa.v1, attention.f16kv.ggml_fa_split<N>.v1 (through
 * attention_ggmlfa_ref_body.h) and attention_kq.f16kv.ggml_fa.v1.
 */
#ifndef KM_GGMLFA_DOT_REF_H
#define KM_GGMLFA_DOT_REF_H

#include <math.h>

#include "km_common.h"

static inline float km_fa_dot_ref(const km_half *k, const km_half *q, int64_t D) {
    float acc[64] = {0.0f};
    const int64_t d64 = D & ~(int64_t)63;
    for (int64_t i = 0; i < d64; i++) {
        acc[i & 63] = fmaf(km_fp16_to_fp32(k[i]), km_fp16_to_fp32(q[i]), acc[i & 63]);
    }
    float p[16];
    for (int l = 0; l < 16; l++) p[l] = (acc[l] + acc[32 + l]) + (acc[16 + l] + acc[48 + l]);
    for (int w = 8; w >= 2; w >>= 1) {
        for (int l = 0; l < w; l++) p[l] += p[l + w];
    }
    double res = (double)(p[0] + p[1]);
    for (int64_t i = d64; i < D; i++) res += (double)(km_fp16_to_fp32(k[i]) * km_fp16_to_fp32(q[i]));
    return (float)res;
}

#endif /* KM_GGMLFA_DOT_REF_H */
