/* linear/moe_q6_k_q8_k_ggml_avx512vnni.c — km_moe_linear_q6_k_q8_k_ggml__avx512vnni: the avx512vnni variant of contract moe_linear.q6_k.q8_k.ggml.v1.
 *
 * Op: moe_linear (linear/moe_rows.h, km_moe_panels): the rows routed to each expert go as panels through the dense
 * km_linear_q6_k_q8_k_ggml__avx512vnni body, included below under a local name (not copied), one multi-row call per panel and column block; so every
 * output element has exactly the dense contract's arithmetic (q6_k weights, q8_k activations).
 * Row bytes: weights K/256*210, activations K/256*292.
 */
#include "moe_rows.h"
#define km_linear_q6_k_q8_k_ggml__avx512vnni km_moe_q6_k_q8_k_ggml_avx512vnni_body
KM_LINEAR_BODY_DECL(km_linear_q6_k_q8_k_ggml__avx512vnni);
#include "q6_k_q8_k_ggml_avx512vnni.c"
#undef km_linear_q6_k_q8_k_ggml__avx512vnni

void km_moe_linear_q6_k_q8_k_ggml__avx512vnni(float *y, const void *w, const void *x, const int32_t *ids, int64_t M, int64_t U, int64_t XS,
        int64_t E, int64_t N, int64_t K, int ith, int nth) {
    km_moe_panels(km_moe_q6_k_q8_k_ggml_avx512vnni_body, y, w, x, ids, M, U, XS, E, N, K, (size_t)(K / 256 * 210), (size_t)(K / 256 * 292),
                ith, nth);
}
