/* bias/add_f32_simd.h — the x86 variants' body of contract bias_add.f32.v1 (bias/add_f32_ref.c).
 *
 * y[m][n] = x[m][n] + b[n], one f32 add per element, so the lanes of common/km_vec_f32.h give the ref's
 * bytes. The ref's partition (the flat M*N range in 16-element chunks over ith/nth), walked row segment
 * by row segment so the bias index needs no division per element; y may alias x.
 */
#include "km_common.h"
#include "km_vec_f32.h"

static inline void kba_rows(float *y, const float *x, const float *b, int64_t M, int64_t N, int ith, int nth) {
    int64_t c0, c1;
    km_part((M * N + 15) / 16, ith, nth, &c0, &c1);
    const int64_t hi = c1 * 16 < M * N ? c1 * 16 : M * N;
    for (int64_t i = c0 * 16; i < hi;) {
        const int64_t n0 = i % N, end = i - n0 + N < hi ? i - n0 + N : hi;
        const float *bb = b - (i - n0);            /* bb[i] == b[i % N] within this row */
        for (; i + KV_LANES <= end; i += KV_LANES) kv_store(y + i, kv_add(kv_load(x + i), kv_load(bb + i)));
        for (; i < end; i++) y[i] = x[i] + bb[i];
    }
}
