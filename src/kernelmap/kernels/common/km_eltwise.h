/* km_eltwise.h — ISA-free helpers of the elementwise family bodies (residual, geglu, swiglu, embedding,
 * and the row walks of the norm, rope and quantize families), written against the lanes interface.
 *
 * Partition of the elementwise contracts: the flat range [0, n) of a tensor split into 16-element
 * chunks, km_part over chunks (each element is its own chain, so any split gives the same bytes).
 */
#ifndef KM_ELTWISE_H
#define KM_ELTWISE_H

#include "km_lanes.h"

/* Thread ith's elements [*lo, *hi) of a flat range of n elements. */
KL_INLINE void kel_flat_slice(int64_t n, int ith, int nth, int64_t *lo, int64_t *hi) {
    int64_t c0, c1;
    km_part((n + 15) / 16, ith, nth, &c0, &c1);
    *lo = c0 * 16;
    *hi = c1 * 16 < n ? c1 * 16 : n;
}

/* Lanes of the vector starting `left` elements before a row's end: 0 .. KL_FV_LANES. */
KL_INLINE int kel_lanes(int64_t left) { return left <= 0 ? 0 : left >= KL_FV_LANES ? KL_FV_LANES : (int)left; }

/* n (<= KL_FV_LANES) floats at p, lanes >= n = +0: a full load when n is the compile-time KL_FV_LANES. */
KL_INLINE kl_fv kel_load(const float *p, const int n) { return n == KL_FV_LANES ? kl_fv_loadu(p) : kl_fv_loadn(p, n); }
KL_INLINE void kel_store(float *p, kl_fv v, const int n) {
    if (n == KL_FV_LANES) kl_fv_storeu(p, v);
    else kl_fv_storen(p, v, n);
}

/* y[i] = op(a[i], b[i]) over thread ith's part of the flat range [0, n) (y may alias a or b); op is a
 * compile-time function of two vectors, inlined. */
typedef kl_fv (*kel_op2)(kl_fv, kl_fv);
KL_INLINE void kel_map2(float *y, const float *a, const float *b, int64_t n, int ith, int nth, const kel_op2 op) {
    int64_t lo, hi;
    kel_flat_slice(n, ith, nth, &lo, &hi);
    int64_t i = lo;
    for (; i + KL_FV_LANES <= hi; i += KL_FV_LANES) kl_fv_storeu(y + i, op(kl_fv_loadu(a + i), kl_fv_loadu(b + i)));
    if (i < hi) {
        const int c = (int)(hi - i);
        kl_fv_storen(y + i, op(kl_fv_loadn(a + i, c), kl_fv_loadn(b + i, c)), c);
    }
}

#endif /* KM_ELTWISE_H */
