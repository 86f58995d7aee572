/* quantize/f16_ref.c — km_quantize_act_f16__ref: the scalar oracle of quantize_act.f16.v1.
 *
 * Op: x [M,K] f32 row-major -> y [M,K] f16 row-major (IEEE halves). Numerics (llama.cpp's x86
 * ggml_cpu_fp32_to_fp16, the from_float of vec_dot_type F16: vcvtps2ph with round to nearest even):
 * y = x rounded to the nearest even half, overflow to inf, subnormal halves kept, NaN quieted.
 * Every variant is bit-exact with this file.
 * Partition: the M*K values as one flat range in groups of 8 (km_part over the groups); element-wise, so
 * results are identical for every (ith, nth).
 */
#include "km_common.h"

void km_quantize_act_f16__ref(void *y, const float *x, int64_t M, int64_t K, int ith, int nth) {
    const int64_t total = M * K;
    int64_t lo, hi;
    km_part((total + 7) / 8, ith, nth, &lo, &hi);
    km_half *out = (km_half *)y;
    for (int64_t i = 8 * lo; i < 8 * hi && i < total; i++) out[i] = km_fp32_to_fp16(x[i]);
}
