/* rope/normal_f32_avx2.c — km_rope_normal_f32__avx2: (AVX2) bit-exact with ref under contract rope.normal.f32.v1.
 *
 * Op: rotary position embedding, normal layout: element 2i pairs with 2i + 1, on x f32 [M, H*D] (row-major, H heads
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

/* One head: pairs (2i, 2i + 1), 4 pairs (8 floats) per step: y = fma(dup_even(x), (c, s), dup_odd(x) * (-s, c)),
 * i.e. fma(x0, c, -(x1*s)) in even lanes and fma(x0, s, x1*c) in odd lanes, the ref's operations. */
static void rotate(float *y, const float *x, int64_t half, const float *cs, const float *sn) {
    int64_t i = 0;
    const __m128 sign = _mm_set1_ps(-0.0f);
    for (; i + 4 <= half; i += 4) {
        const __m256 v = _mm256_loadu_ps(x + 2 * i);
        const __m128 c = _mm_loadu_ps(cs + i), s = _mm_loadu_ps(sn + i), ns = _mm_xor_ps(s, sign);
        const __m256 cs_il = _mm256_set_m128(_mm_unpackhi_ps(c, s), _mm_unpacklo_ps(c, s));
        const __m256 nsc_il = _mm256_set_m128(_mm_unpackhi_ps(ns, c), _mm_unpacklo_ps(ns, c));
        const __m256 t = _mm256_mul_ps(_mm256_movehdup_ps(v), nsc_il);
        _mm256_storeu_ps(y + 2 * i, _mm256_fmadd_ps(_mm256_moveldup_ps(v), cs_il, t));
    }
    for (; i < half; i++) {
        const float x0 = x[2 * i], x1 = x[2 * i + 1];
        y[2 * i] = fmaf(x0, cs[i], -(x1 * sn[i]));
        y[2 * i + 1] = fmaf(x0, sn[i], x1 * cs[i]);
    }
}

void km_rope_normal_f32__avx2(float *y, const float *x, int64_t M, int64_t H, int64_t D, int64_t pos,
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
