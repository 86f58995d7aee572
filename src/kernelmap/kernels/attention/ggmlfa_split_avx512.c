/* attention/ggmlfa_split_avx512.c — km_attention_f16kv_ggmlfa_split2__avx512, km_attention_f16kv_ggmlfa_split4__avx512:
 * AVX-512 F (+ F16C, FMA) variants of contracts attention.f16kv.ggml_fa_split2.v1 and ggml_fa_split4.v1.
 *
 * Op, constraints and numerics: those of ggmlfa_split_ref.c, which these variants match byte for byte for
 * every (ith, nth): each row computed as llama.cpp decoding it alone with N threads (N = 2 or 4, from the
 * contract): the plain one-row path below a 512-cell KV view, else llama.cpp's N cell ranges each run from a
 * fresh online-softmax state and merged in f32 in range order (attention_ggmlfa_split.h).
 * Schedule: ggmlfa_avx512.c's (attention_ggmlfa_avx512_body.h: groups of up to 4 heads of a row reading one
 * KV head, plus the same heads of the next row when both rows are whole in the thread's range and have the
 * same KV view length, hence the same ranges), run once per range with the keys clipped to it; the merge and
 * the final scaling are the shared plain C of attention_ggmlfa_split.h.
 * Partition: (row, head) items it = m*Hq + h in contiguous ranges of equal work (attention_ggmlfa_part.h);
 * no reduction crosses items, so results do not depend on (ith, nth).
 */
#include "attention_ggmlfa_avx512_body.h"
#include "attention_ggmlfa_split.h"

/* llama.cpp's ranges are the same for rows p and p+1 when their KV views have the same length */
static int same_view(int64_t p) { return km_fa_llama_n_kv(p) == km_fa_llama_n_kv(p + 1); }

/* One group (rows m and, when rows == 2, m+1: one KV view length): the plain path below 512 cells, else one
 * fresh state per range with the keys clipped to it, merged in range order. */
static void split_group(const km_fa_args *a, const int64_t *its, int n, int rows, int64_t kvh, int64_t m) {
    km_fa_state st;
    float fin[KM_FA_G * KM_FA_DMAX] __attribute__((aligned(64))); /* [G][D] merged */
    float fin_m[KM_FA_G], fin_s[KM_FA_G];
    const int G = n * rows;
    const int64_t D = a->D, p = a->pos + m;
    const km_half *kb = a->kc + kvh * a->C * D, *vb = a->vc + kvh * a->C * D;
    const int use_vexp = vexp_usable();
    group_q(&st, a->q, its, G, D, a->scale);
    if (!km_fa_is_split(p)) {
        group_reset(&st, G, D);
        group_keys(&st, n, rows, kb, vb, D, p, a->window, 0, p + 1, use_vexp);
        group_store(&st, a->y, its, G, D);
        return;
    }
    for (int g = 0; g < G; g++) {
        for (int64_t d = 0; d < D; d++) fin[g * D + d] = 0.0f;
        fin_m[g] = -INFINITY;
        fin_s[g] = 0.0f;
    }
    for (int64_t t = 0; t < a->n_split; t++) {
        int64_t lo, hi;
        km_fa_split_cells(p, a->n_split, t, &lo, &hi);
        group_reset(&st, G, D);
        group_keys(&st, n, rows, kb, vb, D, p, a->window, lo, hi, use_vexp);
        for (int g = 0; g < G; g++) {
            km_fa_split_merge(&fin_m[g], &fin_s[g], fin + g * D, st.big_m[g], st.big_s[g], st.acc + g * D, D);
        }
    }
    for (int g = 0; g < G; g++) km_fa_split_store(a->y + its[g] * D, fin + g * D, fin_s[g], D);
}

static void split_avx512(float *y, const float *q, const void *k_cache, const void *v_cache, int64_t M, int64_t Hq,
        int64_t Hkv, int64_t D, int64_t C, int64_t pos, float scale, int64_t window, int64_t n_split, int ith,
        int nth) {
    const km_fa_args a = {y, q, (const km_half *)k_cache, (const km_half *)v_cache, D, C, pos, window, n_split, scale};
    km_fa_walk(&a, M, Hq, Hkv, ith, nth, same_view, split_group);
}
/* Both maps' entry points live in this one unit; each is declared here, since a build that selects one
 * map's variant declares only that one (builds refuse undeclared exports). */
void km_attention_f16kv_ggmlfa_split2__avx512(float *y, const float *q, const void *k_cache, const void *v_cache,
        int64_t M, int64_t Hq, int64_t Hkv, int64_t D, int64_t C, int64_t pos, float scale, int64_t window, int ith,
        int nth);
void km_attention_f16kv_ggmlfa_split4__avx512(float *y, const float *q, const void *k_cache, const void *v_cache,
        int64_t M, int64_t Hq, int64_t Hkv, int64_t D, int64_t C, int64_t pos, float scale, int64_t window, int ith,
        int nth);

void km_attention_f16kv_ggmlfa_split2__avx512(float *y, const float *q, const void *k_cache, const void *v_cache,
        int64_t M, int64_t Hq, int64_t Hkv, int64_t D, int64_t C, int64_t pos, float scale,
        int64_t window, int ith, int nth) {
    split_avx512(y, q, k_cache, v_cache, M, Hq, Hkv, D, C, pos, scale, window, 2, ith, nth);
}

void km_attention_f16kv_ggmlfa_split4__avx512(float *y, const float *q, const void *k_cache, const void *v_cache,
        int64_t M, int64_t Hq, int64_t Hkv, int64_t D, int64_t C, int64_t pos, float scale,
        int64_t window, int ith, int nth) {
    split_avx512(y, q, k_cache, v_cache, M, Hq, Hkv, D, C, pos, scale, window, 4, ith, nth);
}
