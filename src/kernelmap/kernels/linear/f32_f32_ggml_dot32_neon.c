/* linear/f32_f32_ggml_dot32_neon.c — km_linear_f32_f32_ggml_dot32__neon: contract linear.f32.f32.ggml_dot32.v1.
 *
 * An instantiation of the family body linear/float_ggml_body.h with its numerics parameter KFL_DOTW = 32
 * (llama.cpp's AVX2 build; numerics there and in f32_f32_ggml_dot32_ref.c). Byte-identical to
 * km_linear_f32_f32_ggml_dot32__ref for every (ith, nth) and M, on the AArch64 AdvSIMD lanes.
 */
#include "km_lanes_neon.h"

#define KFL_DOTW 32  /* contract linear.f32.f32.ggml_dot32.v1 */
#define KFL_R1 1     /* decode: weight rows per step */
#define KFL_TT 2     /* prefill: activation rows per tile */
#define KFL_PF 4096  /* prefetch distance in bytes along each weight row (to L2; as the q32 NEON decode) */
#include "float_ggml_body.h"

void km_linear_f32_f32_ggml_dot32__neon(float *y, const void *w, const void *x, int64_t M, int64_t N, int64_t K, int ith,
                                  int nth) {
    kfl_linear(y, w, x, M, N, K, ith, nth, KFL_F32);
}
