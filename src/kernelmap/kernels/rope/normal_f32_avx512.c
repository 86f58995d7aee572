/* rope/normal_f32_avx512.c — km_rope_normal_f32__avx512: (AVX-512 F) bit-exact with ref under contract rope.normal.f32.v1.
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

/* One head: pairs (2i, 2i + 1), 8 pairs (16 floats) per step: y = fma(dup_even(x), (c, s), dup_odd(x) * (-s, c)),
 * i.e. fma(x0, c, -(x1*s)) in even lanes and fma(x0, s, x1*c) in odd lanes, the ref's operations. */
static void rotate(float *y, const float *x, int64_t half, const float *cs, const float *sn) {
    int64_t i = 0;
    const __m512i il = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    const __m512 sign = _mm512_castsi512_ps(_mm512_set1_epi32((int)0x80000000u));
    for (; i + 8 <= half; i += 8) {
        const __m512 v = _mm512_loadu_ps(x + 2 * i);
        const __m512 c = _mm512_castps256_ps512(_mm256_loadu_ps(cs + i));
        const __m512 s = _mm512_castps256_ps512(_mm256_loadu_ps(sn + i));
        const __m512 ns = _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(s), _mm512_castps_si512(sign)));
        const __m512 cs_il = _mm512_permutex2var_ps(c, il, s);
        const __m512 nsc_il = _mm512_permutex2var_ps(ns, il, c);
        const __m512 t = _mm512_mul_ps(_mm512_movehdup_ps(v), nsc_il);
        _mm512_storeu_ps(y + 2 * i, _mm512_fmadd_ps(_mm512_moveldup_ps(v), cs_il, t));
    }
    for (; i < half; i++) {
        const float x0 = x[2 * i], x1 = x[2 * i + 1];
        y[2 * i] = fmaf(x0, cs[i], -(x1 * sn[i]));
        y[2 * i + 1] = fmaf(x0, sn[i], x1 * cs[i]);
    }
}

void km_rope_normal_f32__avx512(float *y, const float *x, int64_t M, int64_t H, int64_t D, int64_t pos,
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
