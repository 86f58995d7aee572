/* quantize/q8_k_ref.c — km_quantize_act_q8_k__ref: the scalar oracle of contract quantize_act.q8_k.v1.
 *
 * Op: x f32 [M][K] row_major -> y q8_k blocks [M][K/256] (292 B each). K must be a multiple of 256.
 * Partition: rows (km_part over M); when M == 1, blocks of the single row (km_part over K/256).
 * Every block is independent, so both splits give byte-identical output for any nth.
 * Numerics (llama.cpp's quantize_row_q8_K_ref semantics; inputs finite, and a nonzero block needs
 *   |max| >= 2^-120 so that iscale stays finite):
 *   amax = max |x[j]| over the block; max = x[j] at the FIRST j reaching amax (signed).
 *   amax == 0: d = 0, qs = 0, bsums = 0 (llama.cpp leaves bsums unwritten there; we write zeros).
 *   else iscale = -127.0f / max (f32 division), q[j] = min(127, round_half_even(iscale * x[j]))
 *        (one f32 multiply, then round to nearest, ties to even: llama.cpp's nearest_int trick),
 *        bsums[i] = sum of q[16i..16i+15], d = 1.0f / iscale (f32 division; d is f32, not f16).
 * No FMA.
 */
#include "km_q8_k_ref.h"

void km_quantize_act_q8_k__ref(void *y, const float *x, int64_t M, int64_t K, int ith, int nth) {
    const int64_t nb = K / KM_QK_K;
    km_block_q8_k *out = (km_block_q8_k *)y;
    int64_t lo, hi;
    if (M == 1) {
        km_part(nb, ith, nth, &lo, &hi);
        for (int64_t b = lo; b < hi; ++b) km_q8_k_block_ref(x + b * KM_QK_K, &out[b]);
        return;
    }
    km_part(M, ith, nth, &lo, &hi);
    for (int64_t m = lo; m < hi; ++m) {
        for (int64_t b = 0; b < nb; ++b) km_q8_k_block_ref(x + m * K + b * KM_QK_K, &out[m * nb + b]);
    }
}
