/* linear/q6_k_q8_k_ggml_avx2.c — km_linear_q6_k_q8_k_ggml__avx2 (AVX2 + FMA + F16C): contract
 * linear.q6_k.q8_k.ggml.v1 (llama.cpp's x86 vec_dot_q6_K_q8_K order).
 *
 * Op, layouts, partition (output columns n, all M rows per thread) and numerics exactly as
 * linear/q6_k_q8_k_ggml_ref.c; must be byte-identical to km_linear_q6_k_q8_k_ggml__ref for every M,
 * N, K (multiple of 256) and every (ith, nth).
 * Integer part: each 32-value chunk c of codes u (0..63) goes through vpmaddubsw with the int8
 * activations (pairs <= 2*63*128, no saturation), then vpmaddwd with the chunk's two int8 scales
 * widened to int16 (8 x sc[2c], 8 x sc[2c+1]), so int32 lane l holds sc * (4 products of values
 * 32c+4l..32c+4l+3): the ref's lane. The offset -32 * (sc[2l]*bs[2l] + sc[2l+1]*bs[2l+1]) is
 * vpmaddwd(bsums, -32 * scales) (int16 operands <= 4096 in magnitude, exact) and seeds the int32
 * accumulator. Float part: one 8-lane ymm accumulator per (m, n), acc = fma(t, cvt(lane), acc) with
 * t = fp16(w.d) * x.d broadcast, then the ref's fixed fold (km_kq_reduce8_ps).
 * Tiling: one weight row against up to 4 activation rows, so each unpacked q6 block is reused 4x;
 * columns and row tiles loop as linear/q6_k_ggml.h states (chunks of ~64 KiB of weights, all row
 * tiles over one chunk before the next).
 */
#include <immintrin.h>

#include "km_common.h"
#include "km_kquant.h"

static inline __attribute__((always_inline)) void row_tile(float *y, int64_t N, const km_block_q6_k *wr,
                                                           const km_block_q8_k *xr, int64_t nb, const int MT) {
    __m256 facc[4];
    for (int r = 0; r < MT; ++r) facc[r] = _mm256_setzero_ps();
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const __m256i m2 = _mm256_set1_epi8(0x03);
    for (int64_t b = 0; b < nb; ++b) {
        const km_block_q6_k *wb = &wr[b];
        const __m128i sc8 = _mm_loadu_si128((const __m128i *)wb->scales);
        /* -32 * sc (|.| <= 4096, exact in int16): vpmaddwd with the bsums gives lane l's offset term
         * -32 * (sc[2l]*bs[2l] + sc[2l+1]*bs[2l+1]) directly; it seeds the accumulator. */
        const __m256i scn = _mm256_sub_epi16(_mm256_setzero_si256(), _mm256_slli_epi16(_mm256_cvtepi8_epi16(sc8), 5));
        __m256i acc[4];
        for (int r = 0; r < MT; ++r)
            acc[r] = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)xr[r * nb + b].bsums), scn);
        for (int h = 0; h < 2; ++h) {
            const __m256i ql0 = _mm256_loadu_si256((const __m256i *)(wb->ql + 64 * h));
            const __m256i ql1 = _mm256_loadu_si256((const __m256i *)(wb->ql + 64 * h + 32));
            const __m256i qh = _mm256_loadu_si256((const __m256i *)(wb->qh + 32 * h));
            __m256i u[4];
            u[0] = _mm256_or_si256(_mm256_and_si256(ql0, m4), _mm256_slli_epi16(_mm256_and_si256(qh, m2), 4));
            u[1] = _mm256_or_si256(_mm256_and_si256(ql1, m4),
                                   _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2), m2), 4));
            u[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4),
                                   _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 4), m2), 4));
            u[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4),
                                   _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 6), m2), 4));
            for (int t = 0; t < 4; ++t) {
                const char a = (char)(8 * h + 2 * t); /* chunk c = 4h + t covers sub-blocks 2c, 2c+1 */
                const __m128i idx = _mm_setr_epi8(a, a, a, a, a, a, a, a, (char)(a + 1), (char)(a + 1),
                                                  (char)(a + 1), (char)(a + 1), (char)(a + 1), (char)(a + 1),
                                                  (char)(a + 1), (char)(a + 1));
                const __m256i s = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(sc8, idx));
                for (int r = 0; r < MT; ++r) {
                    const int8_t *q8 = xr[r * nb + b].qs + 128 * h + 32 * t;
                    const __m256i d = _mm256_maddubs_epi16(u[t], _mm256_loadu_si256((const __m256i *)q8));
                    acc[r] = _mm256_add_epi32(acc[r], _mm256_madd_epi16(d, s));
                }
            }
        }
        const __m256 wd = _mm256_set1_ps(_cvtsh_ss(wb->d));
        for (int r = 0; r < MT; ++r) {
            const __m256 t = _mm256_mul_ps(wd, _mm256_broadcast_ss(&xr[r * nb + b].d));
            facc[r] = _mm256_fmadd_ps(t, _mm256_cvtepi32_ps(acc[r]), facc[r]);
        }
    }
    for (int r = 0; r < MT; ++r) y[r * N] = km_kq_reduce8_ps(facc[r]);
}

#define Q6KG_ROW_TILES(T) T(4)
#include "q6_k_ggml.h"

void km_linear_q6_k_q8_k_ggml__avx2(float *y, const void *w, const void *x, int64_t M, int64_t N, int64_t K,
                                    int ith, int nth) {
    q6kg_run(y, w, x, M, N, K, ith, nth);
}
