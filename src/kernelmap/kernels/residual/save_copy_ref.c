/* residual/save_copy_ref.c — km_residual_save_copy__ref: the scalar oracle of contract residual_save.copy.v1.
 *
 * Op: y = x, a byte copy of f32 [M, N] (row-major; y and x must not overlap). NaN payloads and
 * signed zeros are preserved (integer moves, no float arithmetic). Partition: the flat M*N range in
 * 16-element chunks (km_part over chunks).
 */
#include "km_common.h"

/* Elementwise ops split the flat range [0, M*N) into 16-element chunks, km_part over chunks. */
static void flat_slice(int64_t n, int ith, int nth, int64_t *lo, int64_t *hi) {
    int64_t c0, c1;
    km_part((n + 15) / 16, ith, nth, &c0, &c1);
    *lo = c0 * 16;
    *hi = c1 * 16 < n ? c1 * 16 : n;
}

void km_residual_save_copy__ref(float *y, const float *x, int64_t M, int64_t N, int ith, int nth) {
    int64_t lo, hi;
    flat_slice(M * N, ith, nth, &lo, &hi);
    if (hi > lo) memcpy(y + lo, x + lo, (size_t)(hi - lo) * sizeof(float));
}
