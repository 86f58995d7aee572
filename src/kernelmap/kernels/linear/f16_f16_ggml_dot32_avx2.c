/* linear/f16_f16_ggml_dot32_avx2.c — km_linear_f16_f16_ggml_dot32__avx2: contract linear.f16.f16.ggml_dot32.v1.
 *
 * An instantiation of the family body linear/float_ggml_body.h with its numerics parameter KFL_DOTW = 32
 * (llama.cpp's AVX2 build; numerics there and in f16_f16_ggml_dot32_ref.c). Byte-identical to
 * km_linear_f16_f16_ggml_dot32__ref for every (ith, nth) and M, on the AVX2 lanes (kl_f8 one ymm; an
 * AVX-512 CPU runs this variant too: the order is 8-lane).
 */
#include "km_lanes_avx2.h"

#define KFL_DOTW 32  /* contract linear.f16.f16.ggml_dot32.v1 */
#define KFL_R1 1     /* decode: weight rows per step */
#define KFL_TT 2     /* prefill: activation rows per tile */
#define KFL_PF 8192  /* prefetch distance in bytes along each weight row (to L2): 1024 left the LM-head GEMV ~35% slower */
#include "float_ggml_body.h"

void km_linear_f16_f16_ggml_dot32__avx2(float *y, const void *w, const void *x, int64_t M, int64_t N, int64_t K, int ith,
                                  int nth) {
    kfl_linear(y, w, x, M, N, K, ith, nth, KFL_F16);
}
