/* residual/add_f32_ref.c — km_residual_add_f32__ref: the scalar oracle of contract residual_add.f32.v1.
 *
 * Op: y = a + b elementwise over f32 [M, N] (row-major; y may alias a or b). One IEEE f32 add per
 * element (round to nearest even), so every variant is bit-exact. Partition: the flat M*N range in
 * 16-element chunks (km_part over chunks); elementwise, so any nth gives the same bytes.
 */
#include "km_common.h"

/* Elementwise ops split the flat range [0, M*N) into 16-element chunks, km_part over chunks. */
static void flat_slice(int64_t n, int ith, int nth, int64_t *lo, int64_t *hi) {
    int64_t c0, c1;
    km_part((n + 15) / 16, ith, nth, &c0, &c1);
    *lo = c0 * 16;
    *hi = c1 * 16 < n ? c1 * 16 : n;
}

void km_residual_add_f32__ref(float *y, const float *a, const float *b, int64_t M, int64_t N, int ith, int nth) {
    int64_t lo, hi;
    flat_slice(M * N, ith, nth, &lo, &hi);
    for (int64_t i = lo; i < hi; i++) y[i] = a[i] + b[i];
}
