/* linear/bf16_bf16_ggml_avx512.c — km_linear_bf16_bf16_ggml__avx512: contract linear.bf16.bf16.ggml.v1.
 *
 * An instantiation of the family body linear/float_ggml_body.h (numerics there). Byte-identical to
 * km_linear_bf16_bf16_ggml__ref for every (ith, nth) and M, on the AVX-512 F/BW/VL/DQ lanes (kl_f8 one ymm,
 * 32 registers).
 */
#include "km_lanes_avx512.h"

#define KFL_R1 1     /* decode: weight rows per step; one row at a time reads the tensor in address order (Zen 5, 2 threads, 16-lane body: 4 or 2 rows -> 1: f16 GEMV +25-30%) */
#define KFL_TT 4     /* prefill: activation rows per tile */
#define KFL_PF 8192  /* prefetch distance in bytes along each weight row (to L2): 1024 left the LM-head GEMV ~35% slower */
#include "float_ggml_body.h"

void km_linear_bf16_bf16_ggml__avx512(float *y, const void *w, const void *x, int64_t M, int64_t N, int64_t K, int ith,
                                      int nth) {
    kfl_linear(y, w, x, M, N, K, ith, nth, KFL_BF16);
}
