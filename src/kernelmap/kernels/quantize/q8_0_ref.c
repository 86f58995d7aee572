/* quantize/q8_0_ref.c — km_quantize_act_q8_0__ref: the scalar oracle of quantize_act.q8_0.v1.
 *
 * Op: x [M,K] f32 row-major -> y [M,K] q8_0 (each row K/32 blocks of 34 bytes). K % 32 == 0.
 * Numerics (llama.cpp's quantize_row_q8_0_ref, bit-exact for finite inputs): per block of 32,
 * amax = max |x_i| (f32); d = amax / 127.0f; id = (d != 0) ? 1.0f / d : 0.0f; y.d = fp16(d) rounded
 * to nearest even; y.qs[i] = (int8)roundf(x_i * id), roundf rounding halves away from zero, so the
 * quants lie in [-127, 127]. An all-zero block gives d = 0 and zero quants. (llama.cpp's own x86
 * SIMD path computes id = 127/amax and rounds halves to even; this contract follows the reference,
 * as gguf-py does.) Partition: the M*K/32 blocks taken as one flat range (so M == 1 splits too);
 * blocks are independent, so results are identical for every (ith, nth).
 */
#include <math.h>

#include "km_common.h"

void km_quantize_act_q8_0__ref(void *y, const float *x, int64_t M, int64_t K, int ith, int nth) {
    int64_t lo, hi;
    km_part(M * (K / KM_QK8_0), ith, nth, &lo, &hi);
    km_block_q8_0 *yb = (km_block_q8_0 *)y;
    for (int64_t b = lo; b < hi; b++) {
        const float *xs = x + b * KM_QK8_0;
        float amax = 0.0f;
        for (int i = 0; i < KM_QK8_0; i++) {
            const float a = fabsf(xs[i]);
            if (a > amax) amax = a;
        }
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        yb[b].d = km_fp32_to_fp16(d);
        for (int i = 0; i < KM_QK8_0; i++) yb[b].qs[i] = (int8_t)roundf(xs[i] * id);
    }
}
