/* linear/moe_q4_0_q8_0_avx512.c — km_moe_linear_q4_0_q8_0__avx512: the avx512 variant of contract moe_linear.q4_0.q8_0.f32.v1.
 *
 * Op: moe_linear (linear/moe_rows.h, km_moe_panels): the rows routed to each expert go as panels through the dense
 * km_linear_q4_0_q8_0__avx512 body, included below under a local name (not copied), one multi-row call per panel and column block; so every
 * output element has exactly the dense contract's arithmetic (q4_0 weights, q8_0 activations).
 * Row bytes: weights K/32*18, activations K/32*34.
 */
#include "moe_rows.h"
#define km_linear_q4_0_q8_0__avx512 km_moe_q4_0_q8_0_avx512_body
KM_LINEAR_BODY_DECL(km_linear_q4_0_q8_0__avx512);
#include "q4_0_q8_0_avx512.c"
#undef km_linear_q4_0_q8_0__avx512

void km_moe_linear_q4_0_q8_0__avx512(float *y, const void *w, const void *x, const int32_t *ids, int64_t M, int64_t U, int64_t XS,
        int64_t E, int64_t N, int64_t K, int ith, int nth) {
    km_moe_panels(km_moe_q4_0_q8_0_avx512_body, y, w, x, ids, M, U, XS, E, N, K, (size_t)(K / 32 * 18), (size_t)(K / 32 * 34),
                ith, nth);
}
