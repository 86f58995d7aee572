/* linear/q4_k_q8_k_avx512vnni.c — km_linear_q4_k_q8_k__avx512vnni (AVX-512 F/BW/VL/DQ + VNNI + F16C):
 * contract linear.q4_k.q8_k.f32.v1.
 *
 * Op, layouts, partition (output columns n) and numerics exactly as linear/q4_k_q8_k_ref.c; must be
 * byte-identical to km_linear_q4_k_q8_k__ref (and so to the avx2/avx512 variants) for every M, N,
 * K (multiple of 256) and every nth. Integer core: vpdpbusd gives, per 64-value chunk, 16 int32
 * lanes of 4-product sums (|sum| <= 4*15*128, so they fit int16 exactly); two chunks are packed to
 * int16 and multiplied by their sub-block scales with one vpmaddwd. isum/imin stay exact int32;
 * the float step runs 8 blocks at a time (block b in lane b % 8) with the ref's per-element f32
 * operations, then the ref's fixed reduction tree. No FMA. Tiling: one weight row against up to 4
 * activation rows (unpacked block reused 4x), which is where VNNI pays off (prefill).
 */
#include <immintrin.h>

#include "km_common.h"
#include "km_kquant.h"
#include "km_kquant_x86.h"

static inline __m128i fold512(__m512i v) {
    const __m256i h = _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
    return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}

/* y[r*N] for r < MT: one q4_k row against MT q8_k rows; 8-block groups, block b in lane b % 8
 * (absent blocks add +0.0f, a no-op since a partial is never -0.0f). */
static inline __attribute__((always_inline)) void row_tile(float *y, int64_t N, const km_block_q4_k *wr,
                                                           const km_block_q8_k *xr, int64_t nb, const int MT) {
    _Alignas(32) int32_t ti[4][8][4];
    _Alignas(32) int32_t tm[4][8][4];
    _Alignas(32) float xd[4][8];
    _Alignas(32) float wd[8];
    _Alignas(32) float wm[8];
    __m256 p[4];
    for (int r = 0; r < MT; ++r) p[r] = _mm256_setzero_ps();
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    const __m512i shift = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(4), 1);
    /* int16 lane L of packs(d0, d1): 128-bit segment k = L/8, i = L%8; i < 4 come from d0 (chunk 2q),
     * i >= 4 from d1 (chunk 2q+1); segments 0-1 hold a chunk's low-nibble sub-block, 2-3 its high one.
     * Sub-block of lane L (for q = 0) = 2*(i >= 4) + (k >= 2). */
    const __m512i pair_idx = _mm512_set_epi16(3, 3, 3, 3, 1, 1, 1, 1, 3, 3, 3, 3, 1, 1, 1, 1,
                                              2, 2, 2, 2, 0, 0, 0, 0, 2, 2, 2, 2, 0, 0, 0, 0);
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
            const __m512i sc16 = _mm512_castsi128_si512(_mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)sc)));
            __m512i acc[4];
            for (int r = 0; r < MT; ++r) acc[r] = _mm512_setzero_si512();
            for (int q = 0; q < 2; ++q) {
                const __m512i w0 = _mm512_and_si512(_mm512_srlv_epi16(_mm512_broadcast_i64x4(
                    _mm256_loadu_si256((const __m256i *)(wb->qs + 64 * q))), shift), m4);
                const __m512i w1 = _mm512_and_si512(_mm512_srlv_epi16(_mm512_broadcast_i64x4(
                    _mm256_loadu_si256((const __m256i *)(wb->qs + 64 * q + 32))), shift), m4);
                const __m512i s = _mm512_permutexvar_epi16(
                    _mm512_add_epi16(pair_idx, _mm512_set1_epi16((short)(4 * q))), sc16);
                for (int r = 0; r < MT; ++r) {
                    const int8_t *q8 = xr[r * nb + b].qs + 128 * q;
                    const __m512i d0 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w0,
                                                           _mm512_loadu_si512((const void *)q8));
                    const __m512i d1 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w1,
                                                           _mm512_loadu_si512((const void *)(q8 + 64)));
                    acc[r] = _mm512_add_epi32(acc[r], _mm512_madd_epi16(_mm512_packs_epi32(d0, d1), s));
                }
            }
            const __m128i mn16 = _mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)mn));
            const __m256i mins = _mm256_set_m128i(_mm_unpackhi_epi16(mn16, mn16), _mm_unpacklo_epi16(mn16, mn16));
            wd[j] = _cvtsh_ss(wb->d);
            wm[j] = _cvtsh_ss(wb->dmin);
            for (int r = 0; r < MT; ++r) {
                const km_block_q8_k *xb = &xr[r * nb + b];
                const __m256i mm = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)xb->bsums), mins);
                _mm_store_si128((__m128i *)tm[r][j],
                                _mm_add_epi32(_mm256_castsi256_si128(mm), _mm256_extracti128_si256(mm, 1)));
                _mm_store_si128((__m128i *)ti[r][j], fold512(acc[r]));
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

void km_linear_q4_k_q8_k__avx512vnni(float *y, const void *w, const void *x, int64_t M, int64_t N, int64_t K,
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
