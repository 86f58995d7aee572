/* geglu/tanh_f32_ref.c — km_geglu_tanh_f32__ref: the scalar oracle of contract geglu.tanh.f32.v1.
 *
 * Op: y = gelu(gate) * up elementwise over f32 [M, F] (row-major; y may alias gate or up).
 * GELU is TABLE-BASED, exactly llama.cpp's CPU geglu (GGML_GELU_FP16): gate <= -10 gives +0.0;
 * gate >= 10 gives gate*up; a NaN gate gives the f32 quiet NaN 0x7FC00000 times up; otherwise
 * gate is rounded to f16 (nearest even) and looked up in gelu_table.h, which holds the f16-rounded
 * tanh GELU of every f16 value up to |10| as llama.cpp builds it (entry-for-entry equal to its
 * ggml_table_gelu_f16 on this range), widened to f32 and multiplied by up (one f32 multiply).
 * SIMD variants convert with vcvtps2ph, gather the same table (clamped indices) and blend the
 * special cases, so they are bit-exact with ref. Partition: the flat M*F range in 16-element chunks.
 */
#include "geglu_ref.h"

/* Elementwise: the flat range [0, M*F) in 16-element chunks, km_part over chunks. */
static void flat_slice(int64_t n, int ith, int nth, int64_t *lo, int64_t *hi) {
    int64_t c0, c1;
    km_part((n + 15) / 16, ith, nth, &c0, &c1);
    *lo = c0 * 16;
    *hi = c1 * 16 < n ? c1 * 16 : n;
}

void km_geglu_tanh_f32__ref(float *y, const float *gate, const float *up, int64_t M, int64_t F, int ith, int nth) {
    int64_t lo, hi;
    flat_slice(M * F, ith, nth, &lo, &hi);
    for (int64_t i = lo; i < hi; i++) y[i] = kgg_geglu1_ref(gate[i], up[i]);
}
