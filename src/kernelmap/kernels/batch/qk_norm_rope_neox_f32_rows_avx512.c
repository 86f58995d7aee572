/* batch/qk_norm_rope_neox_f32_rows_avx512.c — km_qk_norm_rope_neox_f32_rows__avx512:
 * the batch phase's per-row qk_norm_rope of contract qk_norm_rope.neox.f32.v1.
 * km_rows_qk_norm_rope (rows_body.h) calls km_qk_norm_rope_neox_f32__avx512 once per row with M = 1 and the
 * row's position, so every row is bit-identical with the decode path of its sequence.
 */
#include "rows_body.h"

void km_qk_norm_rope_neox_f32__avx512(float *y, const float *x, const float *w, int64_t M, int64_t H,
        int64_t D, int64_t pos, float eps, float freq_base, float freq_scale, int ith, int nth); /* the called map's call_abi */

void km_qk_norm_rope_neox_f32_rows__avx512(float *y, const float *x, const float *w, int64_t M, int64_t H,
        int64_t D, const int64_t *positions, float eps, float freq_base, float freq_scale, int ith, int nth) {
    km_rows_qk_norm_rope(km_qk_norm_rope_neox_f32__avx512, y, x, w, M, H, D, positions, eps, freq_base,
        freq_scale, ith, nth);
}
