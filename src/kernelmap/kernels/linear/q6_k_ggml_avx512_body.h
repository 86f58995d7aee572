/* linear/q6_k_ggml_avx512_body.h — the AVX-512 row tile of contract linear.q6_k.q8_k.ggml.v1, shared by
 * linear/q6_k_q8_k_ggml_avx512.c and linear/q6_k_q8_k_ggml_avx512vnni.c (llama.cpp's x86
 * vec_dot_q6_K_q8_K order).
 *
 * Numerics exactly as linear/q6_k_q8_k_ggml_ref.c; both variants are byte-identical to the ref for
 * every M, N, K (multiple of 256) and every (ith, nth).
 * Integer part: one 512-bit step covers 64 consecutive values = chunks 2g and 2g+1; ql's 64 bytes of
 * a half give the low nibbles, the half's 32 qh bytes are broadcast and shifted per 256-bit half
 * (0/2 for the low-nibble values, 4/6 for the high-nibble ones). vpmaddubsw (codes 0..63 x int8,
 * pairs <= 2*63*128, no saturation) then the including file's dot64 (vpmaddwd + vpaddd, or one
 * vpdpwssd) with the per-16 int16 scales adds sc * (4 products of values 32c+4l..32c+4l+3) to int32
 * lane l of each 256-bit half. The offset -32 * (sc[2l]*bs[2l] + sc[2l+1]*bs[2l+1]) is
 * vpmaddwd(bsums, -32 * scales) (int16 operands <= 4096 in magnitude, exact) and seeds the low half;
 * adding the two halves gives the ref's exact int32 lanes. Float part: one 8-lane accumulator per
 * (m, n), acc = fma(t, cvt(lane), acc) with t = fp16(w.d) * x.d; rows go in pairs, one zmm holding
 * two independent 8-lane accumulators; the end is the ref's fixed fold of each 8-lane half.
 * Tiling: one weight row against up to 8 activation rows (then 4, 2, 1); each unpacked q6 block is
 * reused for every row of the tile; columns and row tiles loop as linear/q6_k_ggml.h states.
 * Partition: output columns n (km_part over N), all M rows per thread.
 *
 * The including file defines, before including this header, the exact int32 dot step
 *   static inline __m512i dot64(__m512i acc, __m512i u, __m512i a, __m512i s);
 * returning acc + vpmaddwd(vpmaddubsw(u, a), s) (int32 lanes, no saturation), then calls
 * q6kg_run(y, w, x, M, N, K, ith, nth) from its entry point.
 */
#ifndef KM_Q6_K_GGML_AVX512_BODY_H
#define KM_Q6_K_GGML_AVX512_BODY_H

#include <immintrin.h>

#include "km_common.h"
#include "km_kquant.h"

#define MT_MAX 8

/* One weight row against MT activation rows (MT = 1 or even). Rows are handled in pairs for the
 * float step: the two 256-bit halves of the pair's int32 accumulators are added into one zmm (row
 * 2p in lanes 0..7, row 2p+1 in lanes 8..15), so one cvt and one fma serve two (m, n) pairs; each
 * 8-lane half is its own accumulator and is folded alone at the end. */
static inline __attribute__((always_inline)) void row_tile(float *y, int64_t N, const km_block_q6_k *wr,
                                                           const km_block_q8_k *xr, int64_t nb, const int MT) {
    const int NP = MT == 1 ? 1 : MT / 2;
    __m512 facc[MT_MAX / 2];
    for (int p = 0; p < NP; ++p) facc[p] = _mm512_setzero_ps();
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    const __m512i m2 = _mm512_set1_epi8(0x03);
    const __m512i sh01 = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1);
    const __m512i sh23 = _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(6), 1);
    /* scale index of int16 lane l of the vector covering values 64g..64g+63 is 4g + l/8 */
    const __m512i lane_sub = _mm512_set_epi16(3, 3, 3, 3, 3, 3, 3, 3, 2, 2, 2, 2, 2, 2, 2, 2,
                                              1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
    for (int64_t b = 0; b < nb; ++b) {
        const km_block_q6_k *wb = &wr[b];
        const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)wb->scales));
        const __m512i sc16w = _mm512_castsi256_si512(sc16);
        /* -32 * sc (|.| <= 4096, exact in int16): vpmaddwd with the bsums gives lane l's offset term
         * -32 * (sc[2l]*bs[2l] + sc[2l+1]*bs[2l+1]) directly; it seeds the low half of the accumulator. */
        const __m256i scn = _mm256_sub_epi16(_mm256_setzero_si256(), _mm256_slli_epi16(sc16, 5));
        __m512i acc[MT_MAX];
        for (int r = 0; r < MT; ++r) {
            const __m256i bs = _mm256_loadu_si256((const __m256i *)xr[r * nb + b].bsums);
            acc[r] = _mm512_zextsi256_si512(_mm256_madd_epi16(bs, scn));
        }
        for (int h = 0; h < 2; ++h) {
            const __m512i ql = _mm512_loadu_si512((const void *)(wb->ql + 64 * h));
            const __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(wb->qh + 32 * h)));
            __m512i u[2];
            u[0] = _mm512_or_si512(_mm512_and_si512(ql, m4),
                                   _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi16(qh, sh01), m2), 4));
            u[1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), m4),
                                   _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi16(qh, sh23), m2), 4));
            for (int g = 0; g < 2; ++g) {
                const int grp = 2 * h + g; /* values 64*grp .. 64*grp+63 */
                const __m512i idx = _mm512_add_epi16(lane_sub, _mm512_set1_epi16((short)(4 * grp)));
                const __m512i s = _mm512_permutexvar_epi16(idx, sc16w);
                for (int r = 0; r < MT; ++r) {
                    const __m512i a = _mm512_loadu_si512((const void *)(xr[r * nb + b].qs + 64 * grp));
                    acc[r] = dot64(acc[r], u[g], a, s);
                }
            }
        }
        const __m512 wd = _mm512_set1_ps(_cvtsh_ss(wb->d));
        if (MT == 1) {
            const __m256i lane = _mm256_add_epi32(_mm512_castsi512_si256(acc[0]), _mm512_extracti64x4_epi64(acc[0], 1));
            const __m256 t = _mm256_mul_ps(_mm512_castps512_ps256(wd), _mm256_broadcast_ss(&xr[b].d));
            const __m256 f = _mm256_fmadd_ps(t, _mm256_cvtepi32_ps(lane), _mm512_castps512_ps256(facc[0]));
            facc[0] = _mm512_castps256_ps512(f);
        } else {
            for (int p = 0; p < NP; ++p) {
                const __m512i a0 = acc[2 * p], a1 = acc[2 * p + 1];
                const __m512i lane = _mm512_add_epi32(_mm512_shuffle_i64x2(a0, a1, 0x44),
                                                      _mm512_shuffle_i64x2(a0, a1, 0xEE));
                const __m512 xd = _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_broadcast_ss(&xr[2 * p * nb + b].d)),
                                                     _mm256_broadcast_ss(&xr[(2 * p + 1) * nb + b].d), 1);
                facc[p] = _mm512_fmadd_ps(_mm512_mul_ps(wd, xd), _mm512_cvtepi32_ps(lane), facc[p]);
            }
        }
    }
    if (MT == 1) {
        y[0] = km_kq_reduce8_ps(_mm512_castps512_ps256(facc[0]));
    } else {
        for (int p = 0; p < NP; ++p) {
            y[2 * p * N] = km_kq_reduce8_ps(_mm512_castps512_ps256(facc[p]));
            y[(2 * p + 1) * N] = km_kq_reduce8_ps(_mm512_extractf32x8_ps(facc[p], 1));
        }
    }
}

#define Q6KG_ROW_TILES(T) T(8) T(4) T(2)
#include "q6_k_ggml.h"

#endif /* KM_Q6_K_GGML_AVX512_BODY_H */
