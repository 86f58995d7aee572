/* attention/attention_ggmlfa_part.h — the work partition of contract attention.f16kv.ggml_fa.v1 (all variants).
 *
 * Items it = m*Hq + h (row m at position pos + m, query head h) cost about as much as the keys they
 * see (n_keys(m) = p - j0 + 1 with p = pos + m, j0 the window start) plus a small fixed setup cost.
 * Thread t gets the contiguous item range [b(t), b(t+1)) where b(t) is the first item i whose
 * midpoint 2*prefix(i) + w(i) reaches 2*t*W/nth (W the total work, prefix(i) the work of items < i):
 * equal work per thread, not equal item counts (a prefill from position 0 has rows of 1 .. M keys).
 * b(0) = 0, b(nth) = M*Hq and b is monotone, so the ranges tile the items exactly. Results never
 * depend on the partition: no reduction crosses items.
 */
#ifndef KM_ATTENTION_GGMLFA_PART_H
#define KM_ATTENTION_GGMLFA_PART_H

#include <stdint.h>

#define KM_FA_ITEM_SETUP 4 /* fixed cost of an item, in keys */

static inline int64_t km_fa_row_work(int64_t m, int64_t pos, int64_t window) {
    const int64_t p = pos + m;
    const int64_t j0 = (window > 0 && p - window + 1 > 0) ? p - window + 1 : 0;
    return p - j0 + 1 + KM_FA_ITEM_SETUP;
}

/* first item i with 2*prefix(i) + w(i) >= 2*target (w(M*Hq) = 0) */
static inline int64_t km_fa_bound(int64_t M, int64_t Hq, int64_t pos, int64_t window, int64_t target) {
    int64_t prefix = 0;
    for (int64_t m = 0; m < M; m++) {
        const int64_t w = km_fa_row_work(m, pos, window);
        for (int64_t h = 0; h < Hq; h++) {
            if (2 * prefix + w >= 2 * target) return m * Hq + h;
            prefix += w;
        }
    }
    return M * Hq;
}

static inline void km_fa_part(int64_t M, int64_t Hq, int64_t pos, int64_t window, int ith, int nth,
        int64_t *lo, int64_t *hi) {
    if (nth < 1) nth = 1;
    if (ith < 0) ith = 0;
    if (ith >= nth) {
        *lo = *hi = M * Hq;
        return;
    }
    int64_t total = 0;
    for (int64_t m = 0; m < M; m++) total += km_fa_row_work(m, pos, window);
    total *= Hq;
    *lo = ith == 0 ? 0 : km_fa_bound(M, Hq, pos, window, total * ith / nth);
    *hi = ith + 1 == nth ? M * Hq : km_fa_bound(M, Hq, pos, window, total * (ith + 1) / nth);
}

#endif /* KM_ATTENTION_GGMLFA_PART_H */
