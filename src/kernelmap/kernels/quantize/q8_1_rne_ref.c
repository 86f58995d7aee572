/* quantize/q8_1_rne_ref.c — km_quantize_act_q8_1_rne__ref: the scalar oracle of quantize_act.q8_1.rne.v1.
 *
 * Op: x [M,K] f32 row-major -> y [M,K] q8_1 (each row K/32 blocks of 36 bytes: f16 d, f16 s, int8 qs[32]).
 * K % 32 == 0. Numerics (llama.cpp's x86 quantize_row_q8_1, which its CPU backend feeds the q4_1 / q5_1 dot
 * products): per block of 32, amax = max |x_i| (exact in any order); d = amax / 127.0f; id = (amax != 0) ?
 * 127.0f / amax : 0.0f; qs[i] = (int8) rint(x_i * id) (halves to even: quants in [-127, 127]);
 * y.d = fp16(d) and y.s = fp16(d * (float) sum_i qs[i]), both rounded to nearest even. Inputs must be
 * finite. Every variant is bit-exact with this file.
 * Partition: the M*K/32 blocks as one flat range; blocks are independent, so results are identical for
 * every (ith, nth).
 */
#include <math.h>

#include "km_common.h"

void km_quantize_act_q8_1_rne__ref(void *y, const float *x, int64_t M, int64_t K, int ith, int nth) {
    int64_t lo, hi;
    km_part(M * (K / 32), ith, nth, &lo, &hi);
    uint8_t *yb = (uint8_t *)y;
    for (int64_t b = lo; b < hi; b++) {
        const float *xs = x + b * 32;
        uint8_t *out = yb + b * 36;
        float amax = 0.0f;
        for (int i = 0; i < 32; i++) {
            const float a = fabsf(xs[i]);
            if (a > amax) amax = a;
        }
        const float d = amax / 127.0f;
        const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
        int32_t sum = 0;
        for (int i = 0; i < 32; i++) {
            const int8_t q = (int8_t)rintf(xs[i] * id);
            out[4 + i] = (uint8_t)q;
            sum += q;
        }
        const km_half hd = km_fp32_to_fp16(d), hs = km_fp32_to_fp16(d * (float)sum);
        memcpy(out, &hd, 2);
        memcpy(out + 2, &hs, 2);
    }
}
