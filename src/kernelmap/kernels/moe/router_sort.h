/* moe/router_sort.h — llama.cpp's argsort of the router probabilities: libstdc++'s std::sort, step by step.
 *
 * Contract: km_argsort_desc(idx, v, n) leaves idx[0..n) = 0..n-1 permuted exactly as GCC 12's
 * libstdc++ std::sort(idx, idx + n, [](a, b) { return v[a] > v[b]; }) does (ggml's CPU argsort, order
 * DESC, which llama.cpp's expert selection takes the first k of). std::sort is not stable, so equal
 * probabilities are ordered the way its algorithm leaves them, not by index: introsort (depth limit
 * 2*floor(log2 n), median-of-three pivot moved to the front, unguarded Hoare partition, heap sort past
 * the depth limit) down to runs of 16, then one insertion sort (guarded over the first 16, unguarded
 * after). For n <= 16 that is a plain insertion sort, which keeps equal values in index order.
 * Comparisons are `v[a] > v[b]` on f32 (NaN compares false both ways, as in C++).
 */
#ifndef KM_MOE_ROUTER_SORT_H
#define KM_MOE_ROUTER_SORT_H

#include <stdint.h>

#define KM_SORT_THRESHOLD 16

static inline int km_sort_gt(const float *v, int32_t a, int32_t b) { return v[a] > v[b]; }

static inline void km_sort_swap(int32_t *a, int32_t *b) {
    const int32_t t = *a;
    *a = *b;
    *b = t;
}

/* std::__unguarded_linear_insert */
static inline void km_sort_linear_insert(int32_t *last, const float *v) {
    const int32_t val = *last;
    int32_t *next = last - 1;
    while (km_sort_gt(v, val, *next)) {
        *last = *next;
        last = next;
        --next;
    }
    *last = val;
}

/* std::__insertion_sort */
static inline void km_sort_insertion(int32_t *first, int32_t *last, const float *v) {
    if (first == last) return;
    for (int32_t *i = first + 1; i != last; ++i) {
        if (km_sort_gt(v, *i, *first)) {
            const int32_t val = *i;
            for (int32_t *p = i; p != first; --p) *p = *(p - 1);
            *first = val;
        } else {
            km_sort_linear_insert(i, v);
        }
    }
}

/* std::__push_heap / std::__adjust_heap (the heap is a max-heap under the comparator) */
static inline void km_sort_push_heap(int32_t *first, int64_t hole, int64_t top, int32_t value, const float *v) {
    int64_t parent = (hole - 1) / 2;
    while (hole > top && km_sort_gt(v, first[parent], value)) {
        first[hole] = first[parent];
        hole = parent;
        parent = (hole - 1) / 2;
    }
    first[hole] = value;
}

static inline void km_sort_adjust_heap(int32_t *first, int64_t hole, int64_t len, int32_t value, const float *v) {
    const int64_t top = hole;
    int64_t child = hole;
    while (child < (len - 1) / 2) {
        child = 2 * (child + 1);
        if (km_sort_gt(v, first[child], first[child - 1])) child--;
        first[hole] = first[child];
        hole = child;
    }
    if ((len & 1) == 0 && child == (len - 2) / 2) {
        child = 2 * (child + 1);
        first[hole] = first[child - 1];
        hole = child - 1;
    }
    km_sort_push_heap(first, hole, top, value, v);
}

/* std::__partial_sort(first, last, last): make_heap then sort_heap */
static inline void km_sort_heap(int32_t *first, int32_t *last, const float *v) {
    const int64_t len = last - first;
    if (len >= 2) {
        for (int64_t parent = (len - 2) / 2;; parent--) {
            km_sort_adjust_heap(first, parent, len, first[parent], v);
            if (parent == 0) break;
        }
    }
    while (last - first > 1) {
        --last;
        const int32_t value = *last;
        *last = *first;
        km_sort_adjust_heap(first, 0, last - first, value, v);
    }
}

/* std::__move_median_to_first */
static inline void km_sort_median_to_first(int32_t *result, int32_t *a, int32_t *b, int32_t *c, const float *v) {
    if (km_sort_gt(v, *a, *b)) {
        if (km_sort_gt(v, *b, *c)) km_sort_swap(result, b);
        else if (km_sort_gt(v, *a, *c)) km_sort_swap(result, c);
        else km_sort_swap(result, a);
    } else if (km_sort_gt(v, *a, *c)) {
        km_sort_swap(result, a);
    } else if (km_sort_gt(v, *b, *c)) {
        km_sort_swap(result, c);
    } else {
        km_sort_swap(result, b);
    }
}

/* std::__unguarded_partition_pivot */
static inline int32_t *km_sort_partition_pivot(int32_t *first, int32_t *last, const float *v) {
    int32_t *mid = first + (last - first) / 2;
    km_sort_median_to_first(first, first + 1, mid, last - 1, v);
    int32_t *lo = first + 1, *hi = last;
    const int32_t pivot = *first;
    for (;;) {
        while (km_sort_gt(v, *lo, pivot)) ++lo;
        --hi;
        while (km_sort_gt(v, pivot, *hi)) --hi;
        if (!(lo < hi)) return lo;
        km_sort_swap(lo, hi);
        ++lo;
    }
}

/* std::__introsort_loop */
static inline void km_sort_introsort(int32_t *first, int32_t *last, int64_t depth, const float *v) {
    while (last - first > KM_SORT_THRESHOLD) {
        if (depth == 0) {
            km_sort_heap(first, last, v);
            return;
        }
        --depth;
        int32_t *cut = km_sort_partition_pivot(first, last, v);
        km_sort_introsort(cut, last, depth, v);
        last = cut;
    }
}

static inline void km_argsort_desc(int32_t *idx, const float *v, int64_t n) {
    for (int64_t i = 0; i < n; i++) idx[i] = (int32_t)i;
    if (n < 2) return;
    int64_t lg = 0;
    while ((int64_t)1 << (lg + 1) <= n) lg++;
    km_sort_introsort(idx, idx + n, 2 * lg, v);
    if (n > KM_SORT_THRESHOLD) {
        km_sort_insertion(idx, idx + KM_SORT_THRESHOLD, v);
        for (int32_t *i = idx + KM_SORT_THRESHOLD; i != idx + n; ++i) km_sort_linear_insert(i, v);
    } else {
        km_sort_insertion(idx, idx + n, v);
    }
}

#endif /* KM_MOE_ROUTER_SORT_H */
