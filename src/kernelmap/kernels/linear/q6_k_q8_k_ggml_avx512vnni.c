/* linear/q6_k_q8_k_ggml_avx512vnni.c — km_linear_q6_k_q8_k_ggml__avx512vnni (AVX-512 F/BW/VL/DQ/VNNI + FMA + F16C):
 * contract linear.q6_k.q8_k.ggml.v1 (llama.cpp's x86 vec_dot_q6_K_q8_K order).
 *
 * Op, layouts, partition (output columns n, all M rows per thread) and numerics exactly as
 * linear/q6_k_q8_k_ggml_ref.c; must be byte-identical to km_linear_q6_k_q8_k_ggml__ref (and so to
 * the other variants) for every M, N, K (multiple of 256) and every (ith, nth).
 * Body (integer and float steps, tiling) in linear/q6_k_ggml_avx512_body.h, as the avx512 variant;
 * this file supplies its int32 dot step with vpmaddwd + vpaddd fused into one vpdpwssd (exact,
 * non-saturating int32 accumulate).
 */
#include <immintrin.h>

#include "km_common.h"
#include "km_kquant.h"

/* acc + sc * (pair sums of u x a): the exact int32 step of 64 values (vpmaddubsw, then vpdpwssd). */
static inline __m512i dot64(__m512i acc, __m512i u, __m512i a, __m512i s) {
    return _mm512_dpwssd_epi32(acc, _mm512_maddubs_epi16(u, a), s);
}

#include "q6_k_ggml_avx512_body.h"

void km_linear_q6_k_q8_k_ggml__avx512vnni(float *y, const void *w, const void *x, int64_t M, int64_t N, int64_t K,
                                          int ith, int nth) {
    q6kg_run(y, w, x, M, N, K, ith, nth);
}
