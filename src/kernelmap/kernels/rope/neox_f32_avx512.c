/* rope/neox_f32_avx512.c — km_rope_neox_f32__avx512: (AVX-512 F) bit-exact with ref under contract rope.neox.f32.v1.
 *
 * Op: rotary position embedding, NeoX layout: element i pairs with i + D/2, on x f32 [M, H*D] (row-major, H heads
 * of D values per row; y may alias x). Row m is at position pos + m. D even, D <= 512.
 * Numerics (ggml rope, ext_factor 0, attn_factor 1, no freq factors): theta_scale =
 * powf(freq_base, -2.0f/D); per row, theta starts at (float)(pos + m) and is multiplied by
 * theta_scale (f32) after each pair; pair i uses t = freq_scale * theta, c = cosf(t), s = sinf(t)
 * (libm, computed the same scalar way in every variant). Rotation with one FMA each, as llama.cpp's
 * CPU build evaluates it (checked bit for bit against ggml_rope_ext): y0 = fma(x0, c, -(x1*s)),
 * y1 = fma(x0, s, x1*c). SIMD variants vectorise only the rotation with the same fused operations
 * (vfmsub/vfmadd), so they are bit-exact with ref. Partition: (row, head) items, km_part over
 * M*H; the cos/sin cache is recomputed when the row changes inside a thread's slice.
 */
#include <immintrin.h>
#include <math.h>

#include "km_common.h"

#define KM_ROPE_DMAX 512

/* cos/sin of theta_i = freq_scale * (pos_f * theta_scale^i), the power taken by repeated f32 multiplication. */
static void rope_cache(float pos_f, float freq_scale, float theta_scale, int64_t half, float *cs, float *sn) {
    float theta = pos_f;
    for (int64_t i = 0; i < half; i++) {
        const float t = freq_scale * theta;
        cs[i] = cosf(t);
        sn[i] = sinf(t);
        theta *= theta_scale;
    }
}

/* One head: pairs (i, i + D/2), 16 pairs per step, masked tail. */
static void rotate(float *y, const float *x, int64_t half, const float *cs, const float *sn) {
    for (int64_t i = 0; i < half; i += 16) {
        const __mmask16 k = (half - i >= 16) ? (__mmask16)0xFFFF : (__mmask16)((1u << (half - i)) - 1u);
        const __m512 x0 = _mm512_maskz_loadu_ps(k, x + i), x1 = _mm512_maskz_loadu_ps(k, x + i + half);
        const __m512 c = _mm512_maskz_loadu_ps(k, cs + i), s = _mm512_maskz_loadu_ps(k, sn + i);
        const __m512 y0 = _mm512_fmsub_ps(x0, c, _mm512_mul_ps(x1, s));
        const __m512 y1 = _mm512_fmadd_ps(x0, s, _mm512_mul_ps(x1, c));
        _mm512_mask_storeu_ps(y + i, k, y0);
        _mm512_mask_storeu_ps(y + i + half, k, y1);
    }
}

void km_rope_neox_f32__avx512(float *y, const float *x, int64_t M, int64_t H, int64_t D, int64_t pos,
        float freq_base, float freq_scale, int ith, int nth) {
    const float theta_scale = powf(freq_base, -2.0f / (float)D);
    const int64_t half = D / 2;
    float cs[KM_ROPE_DMAX / 2], sn[KM_ROPE_DMAX / 2]; /* [D/2] cache of the current row */
    int64_t lo, hi, row = -1;
    km_part(M * H, ith, nth, &lo, &hi);
    for (int64_t it = lo; it < hi; it++) { /* it: (row, head) item = row * H + head */
        if (it / H != row) {
            row = it / H;
            rope_cache((float)(pos + row), freq_scale, theta_scale, half, cs, sn);
        }
        rotate(y + it * D, x + it * D, half, cs, sn);
    }
}
