/* moe/combine_f32_simd.h — the x86 variants' body of contract moe_combine.f32.v1 (moe/combine_f32_ref.c).
 *
 * y[m][n] = ((x0*w0 + x1*w1) + x2*w2) + ...: per lane the ref's f32 multiplies and adds in slot order
 * (no FMA: common/km_vec_f32.h has none), so the bytes equal the ref's. The ref's partition (the flat
 * M*N range in 16-element chunks over ith/nth), walked row segment by row segment.
 */
#include "km_common.h"
#include "km_vec_f32.h"

static inline void kmc_rows(float *y, const float *x, const float *wts, int64_t M, int64_t U, int64_t N, int ith,
                            int nth) {
    int64_t c0, c1;
    km_part((M * N + 15) / 16, ith, nth, &c0, &c1);
    const int64_t hi = c1 * 16 < M * N ? c1 * 16 : M * N;
    for (int64_t i = c0 * 16; i < hi;) {
        const int64_t m = i / N, row = m * N, end = row + N < hi ? row + N : hi;
        const float *xr = x + m * U * N - row;   /* xr[i + u*N] is slot u's value at column i - row */
        const float *wr = wts + m * U;
        for (; i + KV_LANES <= end; i += KV_LANES) {
            kv_f32 acc = kv_mul(kv_load(xr + i), kv_set1(wr[0]));
            for (int64_t u = 1; u < U; u++) acc = kv_add(acc, kv_mul(kv_load(xr + i + u * N), kv_set1(wr[u])));
            kv_store(y + i, acc);
        }
        for (; i < end; i++) {
            float acc = xr[i] * wr[0];
            for (int64_t u = 1; u < U; u++) acc = acc + xr[i + u * N] * wr[u];
            y[i] = acc;
        }
    }
}
