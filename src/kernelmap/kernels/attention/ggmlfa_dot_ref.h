/* attention/ggmlfa_dot_ref.h — the score dots of llama.cpp's CPU flash attention (ggml_vec_dot_f16), one per build.
 *
 * km_fa_dot_ref: its AVX-512 build (GGML_F16_STEP 64: four accumulators of 16 lanes),
 * scalar: element i (i < D rounded down to 64) goes to partial i mod 64 by fmaf in increasing i (f16 x f16
 * products are exact in f32); partials fold P[l] = (A0[l] + A2[l]) + (A1[l] + A3[l]) (Aa[l] = partial 16a + l),
 * then P[l] += P[l+8], P[l] += P[l+4], P[l] += P[l+2], s = P[0] + P[1]; elements D64 .. D-1 are added one by
 * one in double to (double)s, each product formed in float, and the total rounded to float.
 * Shared by the ref oracles of contracts attention.f16kv.ggml_fa.v1, attention.f16kv.ggml_fa_split<N>.v1 (through
 * attention_ggmlfa_ref_body.h) and attention_kq.f16kv.ggml_fa.v1.
 *
 * km_fa_dot32_ref: its AVX2 build without AVX-512 (GGML_F16_STEP 32: four accumulators of 8 lanes), the dot of
 * contract attention.f16kv.ggml_fa_dot32.v1: element i (i < D rounded down to 32) goes to partial i mod 32 by fmaf
 * in increasing i; partials fold P[l] = (A0[l] + A2[l]) + (A1[l] + A3[l]) (Aa[l] = partial 8a + l, l < 8), then
 * T[l] = P[l] + P[l+4] (the two 128-bit halves) and s = (T[0] + T[1]) + (T[2] + T[3]) (two horizontal adds);
 * elements D32 .. D-1 as above, in double. Found by the method of the other contracts: llama.cpp's AVX2 build fed
 * its own inputs (tests/fixtures/llama_ops_avx2) gives these bits and the AVX-512 build's do not.
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

static inline float km_fa_dot32_ref(const km_half *k, const km_half *q, int64_t D) {
    float acc[32] = {0.0f};
    const int64_t d32 = D & ~(int64_t)31;
    for (int64_t i = 0; i < d32; i++) {
        acc[i & 31] = fmaf(km_fp16_to_fp32(k[i]), km_fp16_to_fp32(q[i]), acc[i & 31]);
    }
    float p[8], t[4];
    for (int l = 0; l < 8; l++) p[l] = (acc[l] + acc[16 + l]) + (acc[8 + l] + acc[24 + l]);
    for (int l = 0; l < 4; l++) t[l] = p[l] + p[l + 4];
    double res = (double)((t[0] + t[1]) + (t[2] + t[3]));
    for (int64_t i = d32; i < D; i++) res += (double)(km_fp16_to_fp32(k[i]) * km_fp16_to_fp32(q[i]));
    return (float)res;
}

#endif /* KM_GGMLFA_DOT_REF_H */
