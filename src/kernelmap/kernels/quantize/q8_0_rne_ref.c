/* quantize/q8_0_rne_ref.c — km_quantize_act_q8_0_rne__ref: the scalar oracle of quantize_act.q8_0.rne.v1.
 *
 * Op: x [M,K] f32 row-major -> y [M,K] q8_0 (each row K/32 blocks of 34 bytes). K % 32 == 0.
 * Numerics (the rule llama.cpp's x86 SIMD quantizer applies to activations, which is what its CPU
 * backend feeds q8_0/q5_0/q4_0 dot products): per block of 32, amax = max |x_i| (f32, exact in any
 * order); d = amax / 127.0f; id = (amax != 0) ? 127.0f / amax : 0.0f (note: 127/amax, not 1/d);
 * y.d = fp16(d) rounded to nearest even; y.qs[i] = (int8) rint(x_i * id) with the default rounding
 * mode (halves to even), so the quants lie in [-127, 127]. Inputs must be finite. This differs from
 * quantize_act.q8_0.v1 (gguf-py's and ggml's portable rule: 1/d and halves away from zero) in a few
 * quants per thousand, which is enough to move logits visibly through a deep model. The block rule is
 * common/km_q8_0_ref.h (shared with the q8_0 KV cache's oracles).
 * Partition: the M*K/32 blocks as one flat range; blocks are independent, so results are identical
 * for every (ith, nth).
 */
#include "km_common.h"
#include "km_q8_0_ref.h"

void km_quantize_act_q8_0_rne__ref(void *y, const float *x, int64_t M, int64_t K, int ith, int nth) {
    int64_t lo, hi;
    km_part(M * (K / KM_QK8_0), ith, nth, &lo, &hi);
    km_block_q8_0 *yb = (km_block_q8_0 *)y;
    for (int64_t b = lo; b < hi; b++) km_q8_0_rne_block_ref(&yb[b], x + b * KM_QK8_0);
}
