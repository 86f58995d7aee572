/* linear/q8_0_q8_0_ggml_amx.c — km_linear_q8_0_q8_0_ggml__amx: contract linear.q8_0.q8_0.ggml.v1.
 *
 * Prefill (M >= KQA_MIN_M) on AMX-INT8 tiles: linear/q32_amx_ggml_body.h (a single-class x86 point; the
 * numerics and the exactness argument are there); fewer rows, K > 16384, or an OS that refuses the tile
 * state take the family body linear/q32_ggml_body.h on the AVX-512 VNNI lanes (the avx512vnni variant's
 * schedule). Byte-identical to km_linear_q8_0_q8_0_ggml__ref for every (ith, nth) and M.
 */
#include "km_lanes_avx512_amx.h"

#define KQ32_TT 16      /* activation rows per prefill tile */
#define KQ32_TREG 2    /* tiles up to this many rows keep their t vectors in registers */
#define KQ32_RP 1      /* weight row pairs per prefill tile */
#define KQ32_R1 2      /* decode: weight rows per step */
#define KQ32_PF 8192   /* decode: prefetch distance in bytes (to L2) */
#define KQ32_PFT 4     /* prefill: prefetch distance in weight rows */
#define KQ32_KS 64     /* blocks per K slice */
#define KQ32_NC 128    /* columns per chunk */
#define KQA_MIN_M 16   /* activation rows from which the tiles compute */
#define KQA_PAIRS 16   /* activation row pairs per chunk */
#include "q32_amx_ggml_body.h"

void km_linear_q8_0_q8_0_ggml__amx(float *y, const void *w, const void *x, int64_t M, int64_t N, int64_t K, int ith,
                                   int nth) {
    if (M >= KQA_MIN_M && kqa_linear_q8_0(y, w, x, M, N, K, ith, nth)) return;
    kq32_linear(y, w, x, M, N, K, ith, nth, KL_Q32_Q8_0);
}
