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
 * expf is the C library's (llama.cpp's too); this variant evaluates it with vexp16, which repeats
 * glibc's expf operations bit for bit (all 2^32 inputs checked by the slow test; a self-check at first
 * use switches to calling expf on any difference). FMA: fmaf exactly where written; nothing else is
 * contracted (-ffp-contract=off). Results do not depend on (ith, nth).
 * Partition: (row, head) items it = m*Hq + h, split into contiguous ranges of equal work (keys seen),
 * see attention_ggmlfa_part.h; no reduction crosses items.
 * Schedule (same arithmetic, reordered across independent chains only): a thread walks its items in
 * groups of up to 8 that read the same KV head: up to 4 heads of a row, and the same heads of the next
 * row when both rows are whole in the thread's range (row m+1 sees the keys of row m, except maybe
 * the window's first, plus one: those keys go before / after the common ones, so each item still
 * visits its own keys in increasing j). Q16 is widened to f32 once per item. Keys go in blocks:
 * (1) the block's scores of every item, (2) the online-softmax scalars of the block key by key for
 * each item: the running maximum before each key is a prefix maximum (scanned in lanes), expf on 16
 * lanes by a routine that repeats the C library's expf operations (see vexp16; lanes outside its main
 * range call expf), S = fmaf chain in key order; (3) VKQ in column chunks (64 columns for up to 4
 * items, 32 for more) held in registers as f32 values of f16 numbers (f16 rounding = vcvtps2ph RNE +
 * vcvtph2ps), each chunk stepping through the block's keys in increasing j, each V chunk widened once
 * for all items. When the chunk count D/W >= the item count (Gemma 3: D = 256) blocks are 16 keys and
 * chunk c of step (3) also computes item c's scores of the next block from K rows widened once into a
 * buffer, so the score FMAs overlap the VKQ chain's f16 conversions; otherwise blocks are 32 keys and
 * step (1) shares each widened K row among up to 4 items. Each score's fold is the contract's, done
 * for 16 keys at once (shuffles gather the lanes). Every element of VKQ sees exactly the contract's
 * sequence of roundings.
 */
#include "attention_ggmlfa_avx512_body.h"

/* Test hook: how many of the float bit patterns lo .. lo+n-1 give a vexp16 result that differs
 * (bitwise) from expf; the first such pattern goes to *first. Exported on purpose, so declared here
 * (model builds refuse undeclared exports); a helper, so its name is not km_<id>__<variant>. */
int64_t km_ggmlfa_avx512_expf_check(uint32_t lo, int64_t n, uint32_t *first);
int64_t km_ggmlfa_avx512_expf_check(uint32_t lo, int64_t n, uint32_t *first) {
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i += 16) {
        uint32_t u[16];
        float xs[16], ys[16];
        for (int l = 0; l < 16; l++) u[l] = lo + (uint32_t)(i + l < n ? i + l : 0);
        memcpy(xs, u, sizeof xs);
        _mm512_storeu_ps(ys, vexp16(_mm512_loadu_ps(xs)));
        for (int l = 0; l < 16 && i + l < n; l++) {
            const float e = expf(xs[l]);
            if (memcmp(&e, &ys[l], 4) != 0) {
                if (bad == 0) *first = u[l];
                bad++;
            }
        }
    }
    return bad;
}

/* One group from a fresh state over all its keys (group_keys), normalized. */
static void plain_group(const km_fa_args *a, const int64_t *its, int n, int rows, int64_t kvh, int64_t m) {
    km_fa_state st;
    const int G = n * rows;
    const int64_t p = a->pos + m;
    group_q(&st, a->q, its, G, a->D, a->scale);
    group_reset(&st, G, a->D);
    group_keys(&st, n, rows, a->kc + kvh * a->C * a->D, a->vc + kvh * a->C * a->D, a->D, p, a->window, 0, p + 1,
               vexp_usable());
    group_store(&st, a->y, its, G, a->D);
}

void km_attention_f16kv_ggmlfa__avx512(float *y, const float *q, const void *k_cache, const void *v_cache,
        int64_t M, int64_t Hq, int64_t Hkv, int64_t D, int64_t C, int64_t pos, float scale,
        int64_t window, int ith, int nth) {
    const km_fa_args a = {y, q, (const km_half *)k_cache, (const km_half *)v_cache, D, C, pos, window, 1, scale};
    km_fa_walk(&a, M, Hq, Hkv, ith, nth, NULL, plain_group);
}
