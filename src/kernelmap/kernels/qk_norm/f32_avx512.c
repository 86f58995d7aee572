/* qk_norm/f32_avx512.c — km_qk_norm_f32__avx512: (AVX-512 F) bit-exact with ref under contract qk_norm.f32.v1.
 *
 * Op: per-head RMS norm. x f32 [M, H*D] row-major is viewed as M*H heads of D values; each head is
 * normalised exactly as rmsnorm.f32.v1 normalises a row of N = D values (x*x rounded to f32, summed in
 * f64 into 16 partials by index mod 16, pairwise fold 8/4/2/1, mean = (float)(sum/D),
 * s = 1/sqrtf(mean + eps), y = (x*s)*w[d]), weight w f32 [D] shared by all heads; y may alias x.
 * This is ggml_rms_norm over dim 0 of the [D, H, M] view followed by ggml_mul with w, as llama.cpp's
 * QK-norm does. Any D >= 1. No FMA. Partition: (row, head) items, km_part over M*H; one thread per
 * head, so results are identical for every nth.
 */
#include <immintrin.h>
#include <math.h>

#include "km_common.h"

void km_qk_norm_f32__avx512(float *y, const float *x, const float *w, int64_t M, int64_t H, int64_t D,
        float eps, int ith, int nth) {
    int64_t lo, hi;
    km_part(M * H, ith, nth, &lo, &hi);
    const int64_t N = D;
    for (int64_t m = lo; m < hi; m++) /* m: (row, head) item = row * H + head */ {
        const float *xr = x + m * N; /* [D]: one head */
        float *yr = y + m * N;       /* [D]: one head */
        __m512d a0 = _mm512_setzero_pd(), a1 = _mm512_setzero_pd();
        for (int64_t i = 0; i < N; i += 16) {
            const __mmask16 k = (N - i >= 16) ? (__mmask16)0xFFFF : (__mmask16)((1u << (N - i)) - 1u);
            const __m512 v = _mm512_maskz_loadu_ps(k, xr + i);
            const __m512 s = _mm512_mul_ps(v, v);
            a0 = _mm512_add_pd(a0, _mm512_cvtps_pd(_mm512_castps512_ps256(s)));
            a1 = _mm512_add_pd(a1, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(s), 1))));
        }
        const __m512d t = _mm512_add_pd(a0, a1);
        const __m256d h = _mm256_add_pd(_mm512_castpd512_pd256(t), _mm512_extractf64x4_pd(t, 1));
        const __m128d q = _mm_add_pd(_mm256_castpd256_pd128(h), _mm256_extractf128_pd(h, 1));
        const double sum = _mm_cvtsd_f64(q) + _mm_cvtsd_f64(_mm_unpackhi_pd(q, q));
        const float mean = (float)(sum / (double)N);
        const float scale = 1.0f / sqrtf(mean + eps);
        const __m512 vs = _mm512_set1_ps(scale);
        for (int64_t i = 0; i < N; i += 16) {
            const __mmask16 k = (N - i >= 16) ? (__mmask16)0xFFFF : (__mmask16)((1u << (N - i)) - 1u);
            const __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(k, xr + i), vs);
            _mm512_mask_storeu_ps(yr + i, k, _mm512_mul_ps(v, _mm512_maskz_loadu_ps(k, w + i)));
        }
    }
}
