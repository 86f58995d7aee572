/* geglu/tanh_f32_avx512.c — km_geglu_tanh_f32__avx512: (AVX-512 F/BW gathers) bit-exact with ref under contract geglu.tanh.f32.v1.
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
#include <immintrin.h>

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

static inline __m512 geglu16(__m512 x, __m512 g) {
    const __m256i h = _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m512i hw = _mm512_cvtepu16_epi32(h);
    const __m512i mag = _mm512_min_epu32(_mm512_and_si512(hw, _mm512_set1_epi32(0x7FFF)),
                                         _mm512_set1_epi32(KM_GELU_MAX_MAG));
    const __mmask16 neg = _mm512_test_epi32_mask(hw, _mm512_set1_epi32(0x8000));
    const __m512i idx = _mm512_mask_add_epi32(mag, neg, mag, _mm512_set1_epi32(KM_GELU_HALF));
    const __m512i tv = _mm512_i32gather_epi32(idx, (const void *)km_gelu_f16_table, 2);
    __m512 t = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(tv));
    t = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), t,
                             _mm512_castsi512_ps(_mm512_set1_epi32(0x7FC00000)));
    __m512 r = _mm512_mul_ps(t, g);
    r = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, _mm512_set1_ps(10.0f), _CMP_GE_OQ), r, _mm512_mul_ps(x, g));
    r = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, _mm512_set1_ps(-10.0f), _CMP_LE_OQ), r, _mm512_setzero_ps());
    return r;
}

void km_geglu_tanh_f32__avx512(float *y, const float *gate, const float *up, int64_t M, int64_t F, int ith, int nth) {
    int64_t lo, hi;
    flat_slice(M * F, ith, nth, &lo, &hi);
    for (int64_t i = lo; i < hi; i += 16) {
        const __mmask16 k = (hi - i >= 16) ? (__mmask16)0xFFFF : (__mmask16)((1u << (hi - i)) - 1u);
        _mm512_mask_storeu_ps(y + i, k, geglu16(_mm512_maskz_loadu_ps(k, gate + i), _mm512_maskz_loadu_ps(k, up + i)));
    }
}
