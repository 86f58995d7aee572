/* attention/ggmlfa_avx2.c — km_attention_f16kv_ggmlfa__avx2: AVX2 + FMA + F16C variant of contract attention.f16kv.ggml_fa.v1.
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
 * expf is the C library's (llama.cpp's too); this variant evaluates it with vexp8, which repeats
 * glibc's expf operations bit for bit (all 2^32 inputs checked by the slow test; a self-check at first
 * use switches to calling expf on any difference). FMA: fmaf exactly where written; nothing else is
 * contracted (-ffp-contract=off). Results do not depend on (ith, nth).
 * Partition: (row, head) items it = m*Hq + h, split into contiguous ranges of equal work (keys seen),
 * see attention_ggmlfa_part.h; no reduction crosses items.
 * Schedule (same arithmetic, reordered across independent chains only): a thread walks its items in
 * groups of up to 4 heads of one row that read the same KV head (they see the same keys). Keys go in
 * blocks of 32: (1) the 32 scores of every head of the group (Q16 widened once per item; the
 * horizontal fold done for 8 keys at once), (2) the online-softmax scalars per key in order (running
 * maximum as a prefix-max scan in lanes, expf on 8 lanes by vexp8), (3) VKQ in 16-element column
 * chunks held in registers as f32 values of f16 numbers (f16 rounding = vcvtps2ph RNE + vcvtph2ps),
 * each chunk stepping through the block's keys in increasing j, each V
 * chunk widened once for all heads. Every element of VKQ sees exactly the contract's sequence of
 * roundings; the chunks and heads are independent chains, which hides the dependency latency.
 */
#include "attention_ggmlfa_avx2_body.h"

/* Test hook: how many of the float bit patterns lo .. lo+n-1 give a vexp8 result that differs
 * (bitwise) from expf; the first such pattern goes to *first. Exported on purpose, so declared here
 * (model builds refuse undeclared exports); a helper, so its name is not km_<id>__<variant>. */
int64_t km_ggmlfa_avx2_expf_check(uint32_t lo, int64_t n, uint32_t *first);
int64_t km_ggmlfa_avx2_expf_check(uint32_t lo, int64_t n, uint32_t *first) {
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i += 8) {
        uint32_t u[8];
        float xs[8], ys[8];
        for (int l = 0; l < 8; l++) u[l] = lo + (uint32_t)(i + l < n ? i + l : 0);
        memcpy(xs, u, sizeof xs);
        _mm256_storeu_ps(ys, vexp8(_mm256_loadu_ps(xs)));
        for (int l = 0; l < 8 && i + l < n; l++) {
            const float e = expf(xs[l]);
            if (memcmp(&e, &ys[l], 4) != 0) {
                if (bad == 0) *first = u[l];
                bad++;
            }
        }
    }
    return bad;
}


/* One group from a fresh state over keys j0 .. pos+m, normalized. */
static void plain_group(const km_fa_args *a, int64_t it0, int n, int64_t kvh, int64_t m, int64_t j0) {
    km_fa_state st;
    group_q(&st, a->q, it0, n, a->D, a->scale);
    group_reset(&st, n, a->D);
    run_keys_n(&st, n, a->kc + kvh * a->C * a->D, a->vc + kvh * a->C * a->D, a->D, j0, a->pos + m, vexp_usable());
    group_store(&st, a->y, it0, n, a->D);
}

void km_attention_f16kv_ggmlfa__avx2(float *y, const float *q, const void *k_cache, const void *v_cache,
        int64_t M, int64_t Hq, int64_t Hkv, int64_t D, int64_t C, int64_t pos, float scale,
        int64_t window, int ith, int nth) {
    const km_fa_args a = {y, q, (const km_half *)k_cache, (const km_half *)v_cache, D, C, pos, window, 1, scale};
    km_fa_walk(&a, M, Hq, Hkv, ith, nth, plain_group);
}
