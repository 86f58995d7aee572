/* attention/ggmlfa_ref.c — km_attention_f16kv_ggmlfa__ref: the scalar oracle of contract attention.f16kv.ggml_fa.v1.
 *
 * Op: causal GQA attention of q f32 [M, Hq*D] (row m at position p = pos + m) over the head-major
 * caches k_cache, v_cache f16 [Hkv][C][D]; output y f32 [M, Hq*D]. Query head h reads KV head
 * h / (Hq/Hkv). Row m sees keys j with j <= p and, when window > 0, p - j < window (llama.cpp's
 * standard sliding window: masked iff p - j >= window). The caller guarantees that keys 0 .. pos+M-1
 * are written.
 * KV layout: C cells per KV head, key j in cell j mod C. C >= every position is the full-length layout
 * (cell = position); a smaller C is a ring buffer (the map's cache ports declare "ring": "window"): the
 * caller then guarantees C >= window + M - 1 and that the cells hold keys j0(pos) .. pos+M-1. Keys are
 * visited in increasing position whatever the cells (after a wrap: cells j0 mod C .. C-1, then 0 ..), so
 * the bits do not depend on C.
 * Constraints: D a multiple of 16, D <= 512, Hq a multiple of Hkv.
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
 * expf is the C library's (llama.cpp's too; the SIMD variants evaluate it with vector routines that
 * repeat glibc's expf operations, identical on all 2^32 inputs). FMA: fmaf exactly where
 * written; nothing else is contracted (-ffp-contract=off). Results do not depend on (ith, nth).
 * Partition: (row, head) items it = m*Hq + h, split into contiguous ranges of equal work (keys seen),
 * see attention_ggmlfa_part.h; no reduction crosses items.
 */
#include "km_common.h"
#include "attention_ggmlfa_part.h"
#include "attention_ggmlfa_ref_body.h"

void km_attention_f16kv_ggmlfa__ref(float *y, const float *q, const void *k_cache, const void *v_cache,
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
