/* linear/moe_rows.h — the row loop of every moe_linear provider: each routed row through a dense linear body.
 *
 * Contract (interface moe_linear.token_major.v1): w [E, N, K] holds E experts' weight matrices (the
 * GGUF's *_exps tensor: expert e is N rows of K values, row_bytes(K) each, in the ggml block layout
 * of the provider's weight type); ids i32 [M, U] the experts token m routes to (slot u), from the
 * router; x holds quantized activation rows (XS = 1: one row per token, shared by its U slots, as
 * llama.cpp broadcasts the FFN input; XS = U: row m*U + u per slot, the down projection's input);
 * y f32 [M, U*N]: row (m, u) = W[ids[m][u]] . x(m, u). Every row is one call of the dense linear body
 * of the same contract with M = 1, so each output element is computed by exactly the arithmetic of
 * the dense provider (a linear over rows is row-invariant by that contract). Experts go in increasing
 * e and, within one, rows in (m, u) order: decode reads only the U chosen matrices, prefill reads each
 * matrix once per row routed to it while it is still in cache. ids outside [0, E) are never read as
 * an expert (their rows are left untouched). Partition: the body's (output columns over ith/nth).
 */
#ifndef KM_MOE_ROWS_H
#define KM_MOE_ROWS_H

#include <stddef.h>
#include <stdint.h>

typedef void (*km_linear_body)(float *y, const void *w, const void *x, int64_t M, int64_t N, int64_t K, int ith,
                               int nth);

/* The prototype of a dense linear entry point (interface linear.token_major.v1): a moe provider declares
 * the dense body it includes under its local name with this before the include, so the body is a
 * declared function (builds refuse undeclared exports). */
#define KM_LINEAR_BODY_DECL(name) \
    void name(float *y, const void *w, const void *x, int64_t M, int64_t N, int64_t K, int ith, int nth)

static inline void km_moe_rows(km_linear_body body, float *y, const void *w, const void *x, const int32_t *ids,
        int64_t M, int64_t U, int64_t XS, int64_t E, int64_t N, int64_t K, size_t w_row_bytes, size_t x_row_bytes,
        int ith, int nth) {
    const uint8_t *wb = (const uint8_t *)w;
    const uint8_t *xb = (const uint8_t *)x;
    const size_t w_expert = (size_t)N * w_row_bytes;
    for (int64_t e = 0; e < E; e++) {
        for (int64_t r = 0; r < M * U; r++) { /* r = m * U + u */
            if (ids[r] != e) continue;
            const int64_t xr = XS == 1 ? r / U : r;
            body(y + r * N, wb + (size_t)e * w_expert, xb + (size_t)xr * x_row_bytes, 1, N, K, ith, nth);
        }
    }
}

#endif /* KM_MOE_ROWS_H */
