/* attention/ggmlfa_avx512.c — km_attention_f16kv_ggmlfa__avx512: AVX-512 F (+ F16C, FMA) variant of contract attention.f16kv.ggml_fa.v1.
 *
 * Op: causal GQA attention of q f32 [M, Hq*D] (row m at position p = pos + m) over the head-major
 * caches k_cache, v_cache f16 [Hkv][C][D]; output y f32 [M, Hq*D]. Query head h reads KV head
 * h / (Hq/Hkv). Row m sees keys j with j <= p and, when window > 0, p - j < window (llama.cpp's
 * standard sliding window: masked iff p - j >= window). The caller guarantees pos + M <= C and that
 * keys 0 .. pos+M-1 are written. Constraints: D a multiple of 16, D <= 512, Hq a multiple of Hkv.
 * Numerics: bit for bit llama.cpp's CPU flash attention (ggml flash_attn_ext, one query row at a time,
 * f16 K and V, AVX-512 build) for a graph that scales Q by `scale` before the attention and passes
 * kq_scale 1 (what llama.cpp's Gemma 3 graph does); every rounding is fixed:
 *   Q16[i] = f16_rne(q[i] * scale)  (f32 product, then round to nearest even);
 *   s_j = dot(K_j, Q16): element i (i < D64 = D rounded down to 64) goes to partial (i mod 64) by
 *     fmaf in increasing i (f16 x f16 products are exact in f32); partials fold as
 *     P[l] = (A0[l] + A2[l]) + (A1[l] + A3[l]) with Aa[l] = partial(16a + l), then P[l] += P[l+8],
 *     P[l] += P[l+4], P[l] += P[l+2], s = P[0] + P[1]; elements D64 .. D-1 are added one by one
 *     in double to (double)s (each product formed in float) and the total rounded to float;
 *   keys visited in increasing j; M = -inf, S = 0, VKQ = 0 (f16 [D]); per key:
 *     if s_j > M: ms = expf(M - s_j), M = s_j, VKQ[d] = f16_rne(f32(VKQ[d]) * ms), vs = 1;
 *     else: ms = 1, vs = expf(s_j - M);
 *     VKQ[d] = f16_rne(fmaf(f32(V_j[d]), vs, f32(VKQ[d]))); S = fmaf(S, ms, vs);
 *   y[d] = f32(VKQ[d]) * (S == 0 ? 0 : 1.0f / S).
 * expf is the C library's (all variants call it: it is llama.cpp's too). FMA: fmaf exactly where
 * written; nothing else is contracted (-ffp-contract=off). Results do not depend on (ith, nth).
 * Partition: (row, head) items it = m*Hq + h, km_part over M*Hq; no reduction crosses items.
 * This variant uses the instructions of ggml's AVX-512 path (4 x 16-lane FMA accumulators over the
 * f16-widened K and Q16, vcvtps2ph round-to-nearest-even for every f16 store) with the fold written out
 * in the contract's order; it is byte-identical with ref and avx2.
 */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "km_common.h"

#define KM_FA_DMAX 512
#define KM_RNE (_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)

static inline __m512 ld16(const km_half *p) { return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)p)); }

static inline void st16(km_half *p, __m512 x) { _mm256_storeu_si256((__m256i *)(void *)p, _mm512_cvtps_ph(x, KM_RNE)); }

static inline float dot_ggml(const km_half *k, const km_half *q, int64_t D) {
    __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps(), a2 = _mm512_setzero_ps(), a3 = _mm512_setzero_ps();
    const int64_t d64 = D & ~(int64_t)63;
    for (int64_t i = 0; i < d64; i += 64) {
        a0 = _mm512_fmadd_ps(ld16(k + i), ld16(q + i), a0);
        a1 = _mm512_fmadd_ps(ld16(k + i + 16), ld16(q + i + 16), a1);
        a2 = _mm512_fmadd_ps(ld16(k + i + 32), ld16(q + i + 32), a2);
        a3 = _mm512_fmadd_ps(ld16(k + i + 48), ld16(q + i + 48), a3);
    }
    const __m512 t = _mm512_add_ps(_mm512_add_ps(a0, a2), _mm512_add_ps(a1, a3));
    const __m256 h = _mm256_add_ps(_mm512_castps512_ps256(t),
                                   _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(t), 1)));
    const __m128 u = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    const __m128 v = _mm_add_ps(u, _mm_movehl_ps(u, u));
    double res = (double)_mm_cvtss_f32(_mm_add_ss(v, _mm_shuffle_ps(v, v, 1)));
    for (int64_t i = d64; i < D; i++) res += (double)(km_fp16_to_fp32(k[i]) * km_fp16_to_fp32(q[i]));
    return (float)res;
}

static inline void to_f16_scaled(km_half *q16, const float *q, float scale, int64_t D) {
    const __m512 vs = _mm512_set1_ps(scale);
    for (int64_t d = 0; d < D; d += 16) st16(q16 + d, _mm512_mul_ps(_mm512_loadu_ps(q + d), vs));
}

static inline void scale_f16(km_half *y, float ms, int64_t D) {
    const __m512 vm = _mm512_set1_ps(ms);
    for (int64_t d = 0; d < D; d += 16) st16(y + d, _mm512_mul_ps(ld16(y + d), vm));
}

static inline void mad_f16(km_half *y, const km_half *v, float vs, int64_t D) {
    const __m512 vv = _mm512_set1_ps(vs);
    for (int64_t d = 0; d < D; d += 16) st16(y + d, _mm512_fmadd_ps(ld16(v + d), vv, ld16(y + d)));
}

static inline void finish(float *y, const km_half *vkq, float inv, int64_t D) {
    const __m512 vi = _mm512_set1_ps(inv);
    for (int64_t d = 0; d < D; d += 16) _mm512_storeu_ps(y + d, _mm512_mul_ps(ld16(vkq + d), vi));
}

void km_attention_f16kv_ggmlfa__avx512(float *y, const float *q, const void *k_cache, const void *v_cache,
        int64_t M, int64_t Hq, int64_t Hkv, int64_t D, int64_t C, int64_t pos, float scale,
        int64_t window, int ith, int nth) {
    const km_half *kc = (const km_half *)k_cache; /* [Hkv][C][D] */
    const km_half *vc = (const km_half *)v_cache; /* [Hkv][C][D] */
    const int64_t group = Hq / Hkv;
    int64_t lo, hi;
    km_part(M * Hq, ith, nth, &lo, &hi);
    for (int64_t it = lo; it < hi; it++) {
        const int64_t m = it / Hq, h = it % Hq, kvh = h / group;
        const int64_t p = pos + m;
        const int64_t j0 = (window > 0 && p - window + 1 > 0) ? p - window + 1 : 0;
        const float *qr = q + it * D;                       /* [D] */
        float *yr = y + it * D;                             /* [D] */
        km_half q16[KM_FA_DMAX] __attribute__((aligned(64))); /* [D] */
        km_half vkq[KM_FA_DMAX] __attribute__((aligned(64))); /* [D] */
        to_f16_scaled(q16, qr, scale, D);
        memset(vkq, 0, (size_t)D * sizeof(km_half));
        float big_m = -INFINITY, big_s = 0.0f;
        for (int64_t j = j0; j <= p; j++) {
            const float s = dot_ggml(kc + (kvh * C + j) * D, q16, D);
            float ms = 1.0f, vs = 1.0f;
            if (s > big_m) {
                ms = expf(big_m - s);
                big_m = s;
                scale_f16(vkq, ms, D);
            } else {
                vs = expf(s - big_m);
            }
            mad_f16(vkq, vc + (kvh * C + j) * D, vs, D);
            big_s = fmaf(big_s, ms, vs);
        }
        const float inv = big_s == 0.0f ? 0.0f : 1.0f / big_s;
        finish(yr, vkq, inv, D);
    }
}
