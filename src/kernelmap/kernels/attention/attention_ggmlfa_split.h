/* attention/attention_ggmlfa_split.h — the key split and the merge of contract attention.f16kv.ggml_fa_split<N>.v1
 * (all variants).
 *
 * llama.cpp (ggml-cpu flash_attn_ext, 0.3.36) decodes one query row with f16 K/V over a KV view of n_kv
 * cells; from n_kv >= 512 on it splits the cells among its N threads: thread t runs the one-row online
 * softmax over cells [t*cs, min((t+1)*cs, n_kv)), cs = ceil(n_kv / N), and leaves an unnormalized
 * partial (M_t, S_t, f32 of its f16 VKQ); then the partials are merged in increasing t, in f32:
 *   M' = fmaxf(M, M_t); so = expf(M - M'); sn = expf(M_t - M');
 *   V[d] = fmaf(V[d], so, V_t[d] * sn); S = fmaf(S, so, S_t * sn); M = M'
 * (M = -inf, S = 0, V = 0 to start; a partial with S_t == 0, no visible key, is skipped), and
 * y[d] = V[d] * (1.0f / S) when S != 0 (else y = V). Below 512 cells there is no split (the one-row
 * path of attention.f16kv.ggml_fa.v1). n_kv is llama.cpp's padded view of its KV cache when the cells
 * hold positions 0 .. p in order (one token per decode, no ring wrap): the used cells p + 1 rounded up to
 * a multiple of 256, at least 256 (llama_kv_cache::get_n_kv). Masked cells (future, or outside the
 * sliding window) are skipped inside each range, so a row's visible keys j0 .. p are cut at the range
 * bounds. These helpers are plain C; every variant calls them (the merge is O(N*D) per row and head).
 */
#ifndef KM_ATTENTION_GGMLFA_SPLIT_H
#define KM_ATTENTION_GGMLFA_SPLIT_H

#include <math.h>
#include <stdint.h>

#include "km_expf.h"

#define KM_FA_SPLIT_MIN_KV 512 /* llama.cpp splits the keys from this view length on */

/* llama.cpp's KV view length when it decodes position p (cells 0 .. p used, in order) */
static inline int64_t km_fa_llama_n_kv(int64_t p) {
    const int64_t n = (p + 1 + 255) / 256 * 256;
    return n < 256 ? 256 : n;
}

/* 1 when position p's row is computed in ranges (n_kv >= 512), 0 for the plain one-row path */
static inline int km_fa_is_split(int64_t p) { return km_fa_llama_n_kv(p) >= KM_FA_SPLIT_MIN_KV; }

/* Cells *lo .. *hi (inclusive) of range t of n_split at position p; empty (*lo > *hi) past the view. */
static inline void km_fa_split_cells(int64_t p, int64_t n_split, int64_t t, int64_t *lo, int64_t *hi) {
    const int64_t n_kv = km_fa_llama_n_kv(p);
    const int64_t cs = (n_kv + n_split - 1) / n_split;
    *lo = t * cs;
    *hi = (*lo + cs < n_kv ? *lo + cs : n_kv) - 1;
}

/* Range t of n_split at position p, clipped to the visible keys j0 .. p: keys *js .. *je (none when
 * *js > *je). */
static inline void km_fa_split_keys(int64_t p, int64_t j0, int64_t n_split, int64_t t, int64_t *js, int64_t *je) {
    int64_t lo, hi;
    km_fa_split_cells(p, n_split, t, &lo, &hi);
    *js = lo > j0 ? lo : j0;
    *je = hi < p ? hi : p;
}

/* Merge one range's partial (mc, sc, vc f32 [D]) into the running (big_m, big_s, acc f32 [D]). */
static inline void km_fa_split_merge(float *big_m, float *big_s, float *acc, float mc, float sc, const float *vc,
        int64_t D) {
    if (sc == 0.0f) return;
    const float m_new = fmaxf(*big_m, mc);
    const float so = km_expf(*big_m - m_new), sn = km_expf(mc - m_new);
    for (int64_t d = 0; d < D; d++) acc[d] = fmaf(acc[d], so, vc[d] * sn);
    *big_s = fmaf(*big_s, so, sc * sn);
    *big_m = m_new;
}

/* y = acc * (1/S), or acc itself when S == 0 */
static inline void km_fa_split_store(float *y, const float *acc, float big_s, int64_t D) {
    if (big_s == 0.0f) {
        for (int64_t d = 0; d < D; d++) y[d] = acc[d];
        return;
    }
    const float inv = 1.0f / big_s;
    for (int64_t d = 0; d < D; d++) y[d] = acc[d] * inv;
}

#endif /* KM_ATTENTION_GGMLFA_SPLIT_H */
