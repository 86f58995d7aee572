/* geglu/tanh_f32_avx2.c — km_geglu_tanh_f32__avx2: (AVX2 + F16C gathers) bit-exact with ref under contract geglu.tanh.f32.v1.
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

static inline __m256 geglu8(__m256 x, __m256 g) {
    const __m128i h = _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m256i hw = _mm256_cvtepu16_epi32(h);
    const __m256i mag = _mm256_min_epu32(_mm256_and_si256(hw, _mm256_set1_epi32(0x7FFF)),
                                         _mm256_set1_epi32(KM_GELU_MAX_MAG));
    const __m256i neg = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_srli_epi32(hw, 15));
    const __m256i idx = _mm256_add_epi32(mag, _mm256_and_si256(neg, _mm256_set1_epi32(KM_GELU_HALF)));
    __m256i tv = _mm256_i32gather_epi32((const int *)(const void *)km_gelu_f16_table, idx, 2);
    tv = _mm256_and_si256(tv, _mm256_set1_epi32(0xFFFF));
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(tv, tv), 0x08);
    __m256 t = _mm256_cvtph_ps(_mm256_castsi256_si128(packed));
    t = _mm256_blendv_ps(t, _mm256_castsi256_ps(_mm256_set1_epi32(0x7FC00000)), _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
    __m256 r = _mm256_mul_ps(t, g);
    r = _mm256_blendv_ps(r, _mm256_mul_ps(x, g), _mm256_cmp_ps(x, _mm256_set1_ps(10.0f), _CMP_GE_OQ));
    r = _mm256_blendv_ps(r, _mm256_setzero_ps(), _mm256_cmp_ps(x, _mm256_set1_ps(-10.0f), _CMP_LE_OQ));
    return r;
}

void km_geglu_tanh_f32__avx2(float *y, const float *gate, const float *up, int64_t M, int64_t F, int ith, int nth) {
    int64_t lo, hi;
    flat_slice(M * F, ith, nth, &lo, &hi);
    int64_t i = lo;
    for (; i + 8 <= hi; i += 8) _mm256_storeu_ps(y + i, geglu8(_mm256_loadu_ps(gate + i), _mm256_loadu_ps(up + i)));
    for (; i < hi; i++) y[i] = geglu1(gate[i], up[i]);
}
