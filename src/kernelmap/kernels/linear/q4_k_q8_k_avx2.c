/* linear/q4_k_q8_k_avx2.c — km_linear_q4_k_q8_k__avx2 (AVX2 + F16C): contract linear.q4_k.q8_k.f32.v1.
 *
 * Op, layouts, partition (output columns n) and numerics exactly as linear/q4_k_q8_k_ref.c; must be
 * byte-identical to km_linear_q4_k_q8_k__ref for every M, N, K (multiple of 256) and every nth.
 * The integer parts isum/imin are exact int32 (vpmaddubsw pairs stay <= 2*15*127, no saturation),
 * so only the per-block float step matters: it runs 8 blocks at a time, block b in lane b % 8, with
 * the ref's per-element f32 operations (p[b % 8] += fd*isum - fm*imin), then the ref's fixed
 * reduction tree. No FMA (built with -ffp-contract=off).
 * Tiling: one weight row against up to 4 activation rows, so each unpacked q4 block is reused 4x.
 */
#include <immintrin.h>

#include "km_common.h"
#include "km_kquant.h"
#include "km_kquant_x86.h"

static inline __m128i half_fold(__m256i v) {
    return _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
}

/* y[r*N] for r < MT: one q4_k row `wr` (nb blocks) against MT q8_k rows starting at xr.
 * Blocks go in groups of 8 so that block b's float term lands in lane b % 8 of one vector: the
 * per-lane f32 operations are exactly the ref's scalar ones (absent blocks contribute +0.0f,
 * which leaves a partial unchanged because a partial is never -0.0f). */
static inline __attribute__((always_inline)) void row_tile(float *y, int64_t N, const km_block_q4_k *wr,
                                                           const km_block_q8_k *xr, int64_t nb, const int MT) {
    _Alignas(32) int32_t ti[4][8][4];
    _Alignas(32) int32_t tm[4][8][4];
    _Alignas(32) float xd[4][8];
    _Alignas(32) float wd[8];
    _Alignas(32) float wm[8];
    __m256 p[4];
    for (int r = 0; r < MT; ++r) p[r] = _mm256_setzero_ps();
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    for (int64_t b0 = 0; b0 < nb; b0 += 8) {
        const int cnt = (nb - b0) < 8 ? (int)(nb - b0) : 8;
        for (int j = cnt; j < 8; ++j) { /* absent blocks of a short last group: zero terms */
            wd[j] = wm[j] = 0.0f;
            for (int r = 0; r < MT; ++r) {
                xd[r][j] = 0.0f;
                memset(ti[r][j], 0, sizeof ti[r][j]);
                memset(tm[r][j], 0, sizeof tm[r][j]);
            }
        }
        for (int j = 0; j < cnt; ++j) {
            const int64_t b = b0 + j;
            const km_block_q4_k *wb = &wr[b];
            uint64_t sc, mn;
            km_q4k_scales64(wb->scales, &sc, &mn);
            /* int16 scales 0..7 in both 128-bit halves; lane k is bytes 2k, 2k+1 */
            const __m256i sc16 = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)sc)));
            __m256i acc[4];
            for (int r = 0; r < MT; ++r) acc[r] = _mm256_setzero_si256();
            for (int c = 0; c < 4; ++c) {
                const __m256i q4 = _mm256_loadu_si256((const __m256i *)(wb->qs + 32 * c));
                const __m256i lo = _mm256_and_si256(q4, m4);
                const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q4, 4), m4);
                const __m256i slo = _mm256_shuffle_epi8(sc16, _mm256_set1_epi16((short)(0x0100 + 0x0404 * c)));
                const __m256i shi = _mm256_shuffle_epi8(sc16, _mm256_set1_epi16((short)(0x0302 + 0x0404 * c)));
                for (int r = 0; r < MT; ++r) {
                    const int8_t *q8 = xr[r * nb + b].qs + 64 * c;
                    const __m256i a = _mm256_madd_epi16(
                        _mm256_maddubs_epi16(lo, _mm256_loadu_si256((const __m256i *)q8)), slo);
                    const __m256i h = _mm256_madd_epi16(
                        _mm256_maddubs_epi16(hi, _mm256_loadu_si256((const __m256i *)(q8 + 32))), shi);
                    acc[r] = _mm256_add_epi32(acc[r], _mm256_add_epi32(a, h));
                }
            }
            const __m128i mn16 = _mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)mn));
            const __m256i mins = _mm256_set_m128i(_mm_unpackhi_epi16(mn16, mn16), _mm_unpacklo_epi16(mn16, mn16));
            wd[j] = _cvtsh_ss(wb->d);
            wm[j] = _cvtsh_ss(wb->dmin);
            for (int r = 0; r < MT; ++r) {
                const km_block_q8_k *xb = &xr[r * nb + b];
                const __m256i bs = _mm256_loadu_si256((const __m256i *)xb->bsums);
                _mm_store_si128((__m128i *)tm[r][j], half_fold(_mm256_madd_epi16(bs, mins)));
                _mm_store_si128((__m128i *)ti[r][j], half_fold(acc[r]));
                xd[r][j] = xb->d;
            }
        }
        const __m256 vwd = _mm256_load_ps(wd);
        const __m256 vwm = _mm256_load_ps(wm);
        for (int r = 0; r < MT; ++r) {
            const __m256 vx = _mm256_load_ps(xd[r]);
            const __m256 fd = _mm256_mul_ps(vwd, vx);
            const __m256 fm = _mm256_mul_ps(vwm, vx);
            const __m256 t1 = _mm256_mul_ps(fd, _mm256_cvtepi32_ps(km_kq_fold8(ti[r])));
            const __m256 t2 = _mm256_mul_ps(fm, _mm256_cvtepi32_ps(km_kq_fold8(tm[r])));
            p[r] = _mm256_add_ps(p[r], _mm256_sub_ps(t1, t2));
        }
    }
    for (int r = 0; r < MT; ++r) y[r * N] = km_kq_reduce8_ps(p[r]);
}

void km_linear_q4_k_q8_k__avx2(float *y, const void *w, const void *x, int64_t M, int64_t N, int64_t K,
                               int ith, int nth) {
    const int64_t nb = K / KM_QK_K;
    int64_t n0, n1;
    km_part(N, ith, nth, &n0, &n1);
    const km_block_q8_k *xq = (const km_block_q8_k *)x;
    for (int64_t n = n0; n < n1; ++n) {
        const km_block_q4_k *wr = (const km_block_q4_k *)w + n * nb;
        int64_t m = 0;
        for (; m + 4 <= M; m += 4) row_tile(y + m * N + n, N, wr, xq + m * nb, nb, 4);
        for (; m < M; ++m) row_tile(y + m * N + n, N, wr, xq + m * nb, nb, 1);
    }
}
