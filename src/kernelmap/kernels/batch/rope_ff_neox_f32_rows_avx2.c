/* batch/rope_ff_neox_f32_rows_avx2.c — km_rope_ff_neox_f32_rows__avx2:
 * the batch phase's per-row rope_ff of contract rope_ff.neox.f32.v1.
 * km_rows_rope_ff (rows_family.h) calls km_rope_ff_neox_f32__avx2 once per row with M = 1 and the
 * row's position, so every row is bit-identical with the decode path of its sequence.
 */
#include "rows_family.h"

void km_rope_ff_neox_f32__avx2(float *y, const float *x, const float *f, int64_t M, int64_t H, int64_t D,
        int64_t pos, float freq_base, float freq_scale, int ith, int nth); /* the called map's call_abi */

void km_rope_ff_neox_f32_rows__avx2(float *y, const float *x, const float *f, int64_t M, int64_t H, int64_t D,
        const int64_t *positions, float freq_base, float freq_scale, int ith, int nth) {
    km_rows_rope_ff(km_rope_ff_neox_f32__avx2, y, x, f, M, H, D, positions, freq_base, freq_scale, ith, nth);
}
