/* linear/f16_f16_ggml_neon.c — km_linear_f16_f16_ggml__neon: contract linear.f16.f16.ggml.v1.
 *
 * An instantiation of the family body linear/float_ggml_body.h (numerics there). Byte-identical to
 * km_linear_f16_f16_ggml__ref (and so to the x86 variants) for every (ith, nth) and M, on the AArch64
 * AdvSIMD lanes (kl_f8 two q registers).
 */
#include "km_lanes_neon.h"

#define KFL_R1 1     /* decode: weight rows per step */
#define KFL_TT 2     /* prefill: activation rows per tile */
#define KFL_PF 4096  /* prefetch distance in bytes along each weight row (to L2; as the q32 NEON decode) */
#include "float_ggml_body.h"

void km_linear_f16_f16_ggml__neon(float *y, const void *w, const void *x, int64_t M, int64_t N, int64_t K, int ith,
                                  int nth) {
    kfl_linear(y, w, x, M, N, K, ith, nth, KFL_F16);
}
