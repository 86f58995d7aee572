/* quantize/bf16_ref.c — km_quantize_act_bf16__ref: the scalar oracle of quantize_act.bf16.v1.
 *
 * Op: x [M,K] f32 row-major -> y [M,K] bf16 row-major. Numerics (llama.cpp's ggml_cpu_fp32_to_bf16, the
 * from_float of vec_dot_type BF16, = ggml_compute_fp32_to_bf16): for a NaN, y = (bits >> 16) | 0x40 (quiet);
 * else y = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16 (round to nearest even on bit 16; no flush of
 * subnormals; overflow rounds to inf). Every variant is bit-exact with this file.
 * Partition: the M*K values as one flat range in groups of 8 (km_part over the groups); element-wise, so
 * results are identical for every (ith, nth).
 */
#include "km_common.h"

void km_quantize_act_bf16__ref(void *y, const float *x, int64_t M, int64_t K, int ith, int nth) {
    const int64_t total = M * K;
    int64_t lo, hi;
    km_part((total + 7) / 8, ith, nth, &lo, &hi);
    uint16_t *out = (uint16_t *)y;
    for (int64_t i = 8 * lo; i < 8 * hi && i < total; i++) {
        uint32_t u;
        memcpy(&u, &x[i], 4);
        if ((u & 0x7FFFFFFFu) > 0x7F800000u) out[i] = (uint16_t)((u >> 16) | 64u);
        else out[i] = (uint16_t)((u + (0x7FFFu + ((u >> 16) & 1u))) >> 16);
    }
}
