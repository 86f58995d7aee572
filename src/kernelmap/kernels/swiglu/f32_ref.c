/* swiglu/f32_ref.c — km_swiglu_f32__ref: the scalar oracle of contract swiglu.f32.v1.
 *
 * Op: y = silu(gate) * up elementwise over f32 [M, F] (row-major; y may alias gate or up), with
 * silu(x) = x / (1 + exp(-x)) in f32 (llama.cpp's scalar ggml_silu_f32 times up). ref uses libm
 * expf. SIMD variants use the vector exp below with IEEE division, so they are within the map's
 * tolerance of ref (rtol 1e-6 plus a tiny atol) and byte-identical with each other.
 * Vector exp (common/km_vexp.h: the same op sequence in every SIMD variant, FMA used as written):
 * x = min(89, x); lanes with x < -86.5 give +0.0; x = max(-86.5, x); n = nearest-even(x * 1.44269504f);
 * r = fma(-n, 0.693359375f, x); r = fma(-n, -2.12194440e-4f, r); p = Horner-FMA polynomial
 * (1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1,
 * 5.0000001201e-1) in r; e = (fma(p, r*r, r) + 1) * 2^(n-1) * 2. Within 2 ulp of expf on the range used.
 * Partition: the flat M*F range in 16-element chunks (elementwise; any nth gives the same bytes).
 */
#include <math.h>

#include "km_common.h"
#include "km_expf.h"

/* Elementwise: the flat range [0, M*F) in 16-element chunks, km_part over chunks. */
static void flat_slice(int64_t n, int ith, int nth, int64_t *lo, int64_t *hi) {
    int64_t c0, c1;
    km_part((n + 15) / 16, ith, nth, &c0, &c1);
    *lo = c0 * 16;
    *hi = c1 * 16 < n ? c1 * 16 : n;
}

void km_swiglu_f32__ref(float *y, const float *gate, const float *up, int64_t M, int64_t F, int ith, int nth) {
    int64_t lo, hi;
    flat_slice(M * F, ith, nth, &lo, &hi);
    for (int64_t i = lo; i < hi; i++) {
        const float x = gate[i];
        y[i] = (x / (1.0f + km_expf(-x))) * up[i];
    }
}
