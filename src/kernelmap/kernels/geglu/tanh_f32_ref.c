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
#include "km_common.h"
#include "gelu_table.h"

/* One element, the spec: llama.cpp's ggml_vec_geglu_f32 with GGML_GELU_FP16. */
static inline float geglu1(float x, float g) {
    if (x <= -10.0f) return 0.0f;
    if (x >= 10.0f) return x * g;
    if (x != x) {
        const uint32_t bits = 0x7FC00000u; /* the table's NaN entry 0x7E00 widened to f32 */
        float qnan;
        memcpy(&qnan, &bits, sizeof qnan);
        return qnan * g;
    }
    const km_half h = km_fp32_to_fp16(x);
    const uint32_t idx = (uint32_t)(h & 0x7FFFu) + ((h & 0x8000u) ? (uint32_t)KM_GELU_HALF : 0u);
    return km_fp16_to_fp32(km_gelu_f16_table[idx]) * g;
}

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
    for (int64_t i = lo; i < hi; i++) y[i] = geglu1(gate[i], up[i]);
}
