/* linear/moe_rows.h — the row loops of every moe_linear provider: routed rows through a dense linear body.
 *
 * Contract (interface moe_linear.token_major.v1): w [E, N, K] holds E experts' weight matrices (the
 * GGUF's *_exps tensor: expert e is N rows of K values, row_bytes(K) each, in the ggml block layout
 * of the provider's weight type); ids i32 [M, U] the experts token m routes to (slot u), from the
 * router; x holds quantized activation rows (XS = 1: one row per token, shared by its U slots, as
 * llama.cpp broadcasts the FFN input; XS = U: row m*U + u per slot, the down projection's input);
 * y f32 [M, U*N]: row (m, u) = W[ids[m][u]] . x(m, u). ids outside [0, E) are never read as an expert
 * (their rows are left untouched).
 *
 * Two loops, one arithmetic. Every output element is computed by the dense linear body of the same
 * contract, which claims that y[m][n] depends only on weight row n and activation row m: not on M, the
 * row tiling, the (ith, nth) split, nor which other columns share the call (its only dependence on N
 * is the choice of order by N % 8 for the q4_0/q4_K/q2_K bodies, kept below).
 * - km_moe_rows (the ref providers: the plain oracle): each routed row is one M = 1 call of the body
 *   over the whole expert, with the body's own column partition (ith, nth).
 * - km_moe_panels (the SIMD providers): llama.cpp's one product per expert. The rows routed to expert
 *   e (in (m, u) order) are gathered, up to KM_MOE_RMAX at a time, into a contiguous panel of quantized
 *   activation rows; one multi-row body call per (panel, column block) computes them against the
 *   expert's weights, so each weight block is unpacked once per panel and reused by every row of it
 *   (the body's row tiles), instead of once per row; the panel's outputs are scattered to their rows.
 *   Column blocks are KM_MOE_NC columns (a multiple of 8, so each call's N keeps N % 8 == 0 and the
 *   body's order) when N % 8 == 0, else the whole expert. Work units (expert, panel, block) in that
 *   order weigh rows x columns; thread ith takes the units whose first weight falls in km_part over
 *   the total (valid rows x N), so threads (or the claimed split pieces) share experts by columns and
 *   rows in proportion to the work, and a single-row unit (decode) is one M = 1 call straight into y.
 *   Panels live on the stack (no allocation; KM_MOE_XPANEL bytes of activations, KM_MOE_YPANEL
 *   floats of outputs): the map's scratch would be one buffer shared by every thread of the op (and
 *   takes the op off the claimed split), while each unit here needs its own.
 */
#ifndef KM_MOE_ROWS_H
#define KM_MOE_ROWS_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "km_common.h"

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

#ifndef KM_MOE_NC
#define KM_MOE_NC 64 /* columns per work unit when N % 8 == 0 (a multiple of 8) */
#endif
#define KM_MOE_RMAX 32             /* rows per panel */
#define KM_MOE_XPANEL (96 * 1024) /* bytes of gathered activation rows per panel */
#define KM_MOE_YPANEL 4096         /* floats of panel outputs (rows x block columns) */
#define KM_MOE_EWIN 512            /* experts counted per pass over ids */

/* The units of expert e (me routed rows, the first of its weight at `base`) that start in [lo, hi). */
static inline void km_moe_expert(km_linear_body body, float *y, const uint8_t *we, const uint8_t *xb,
        const int32_t *ids, int64_t e, int64_t me, int64_t base, int64_t lo, int64_t hi, int64_t U,
        int64_t XS, int64_t N, int64_t K, size_t w_row_bytes, size_t x_row_bytes, int64_t nc, int64_t rmax,
        uint8_t *xp, float *yp) {
    const int64_t nblk = (N + nc - 1) / nc;
    int64_t scan = 0; /* next (m, u) row to look at for expert e */
    for (int64_t c0 = 0; c0 < me; c0 += rmax) {
        const int64_t rows = me - c0 < rmax ? me - c0 : rmax;
        const int64_t cb = base + c0 * N; /* unit (e, panel, b) starts at cb + rows * b * nc */
        if (cb >= hi) return;
        int64_t idx[KM_MOE_RMAX];
        for (int64_t i = 0; i < rows; scan++) {
            if (ids[scan] == e) idx[i++] = scan;
        }
        if (cb + rows * N <= lo) continue;
        const int64_t step = rows * nc;
        const int64_t b0 = lo > cb ? (lo - cb + step - 1) / step : 0;
        int64_t b1 = (hi - cb + step - 1) / step;
        if (b1 > nblk) b1 = nblk;
        if (b0 >= b1) continue;
        if (rows == 1) { /* one row: the body writes straight into y */
            const int64_t xr = XS == 1 ? idx[0] / U : idx[0];
            for (int64_t b = b0; b < b1; b++) {
                const int64_t n0 = b * nc, nw = N - n0 < nc ? N - n0 : nc;
                body(y + idx[0] * N + n0, we + (size_t)n0 * w_row_bytes, xb + (size_t)xr * x_row_bytes, 1, nw, K, 0, 1);
            }
            continue;
        }
        for (int64_t i = 0; i < rows; i++) {
            const int64_t xr = XS == 1 ? idx[i] / U : idx[i];
            memcpy(xp + (size_t)i * x_row_bytes, xb + (size_t)xr * x_row_bytes, x_row_bytes);
        }
        for (int64_t b = b0; b < b1; b++) {
            const int64_t n0 = b * nc, nw = N - n0 < nc ? N - n0 : nc;
            body(yp, we + (size_t)n0 * w_row_bytes, xp, rows, nw, K, 0, 1);
            for (int64_t i = 0; i < rows; i++) memcpy(y + idx[i] * N + n0, yp + i * nw, sizeof(float) * (size_t)nw);
        }
    }
}

static inline void km_moe_panels(km_linear_body body, float *y, const void *w, const void *x, const int32_t *ids,
        int64_t M, int64_t U, int64_t XS, int64_t E, int64_t N, int64_t K, size_t w_row_bytes, size_t x_row_bytes,
        int ith, int nth) {
    const int64_t MU = M * U;
    if (MU <= 0 || N <= 0 || E <= 0) return;
    const int64_t nc = N % 8 == 0 && N > KM_MOE_NC ? KM_MOE_NC : N;
    int64_t rmax = (int64_t)(KM_MOE_XPANEL / (x_row_bytes ? x_row_bytes : 1));
    if (rmax > KM_MOE_RMAX) rmax = KM_MOE_RMAX;
    if (rmax * nc > KM_MOE_YPANEL) rmax = KM_MOE_YPANEL / nc;
    if (rmax < 1) rmax = 1; /* rows too wide for a panel: single-row units, no panel used */
    int64_t valid = 0;
    for (int64_t r = 0; r < MU; r++) valid += ids[r] >= 0 && ids[r] < E;
    int64_t lo, hi;
    km_part(valid * N, ith, nth, &lo, &hi);
    if (lo >= hi) return;
    _Alignas(64) uint8_t xp[KM_MOE_XPANEL];
    _Alignas(64) float yp[KM_MOE_YPANEL];
    const uint8_t *wb = (const uint8_t *)w;
    const uint8_t *xb = (const uint8_t *)x;
    int32_t cnt[KM_MOE_EWIN];
    int64_t before = 0; /* valid rows routed to experts below the current one */
    for (int64_t e0 = 0; e0 < E; e0 += KM_MOE_EWIN) {
        const int64_t e1 = E - e0 < KM_MOE_EWIN ? E : e0 + KM_MOE_EWIN;
        memset(cnt, 0, sizeof cnt);
        for (int64_t r = 0; r < MU; r++) {
            if (ids[r] >= e0 && ids[r] < e1) cnt[ids[r] - e0]++;
        }
        for (int64_t e = e0; e < e1; e++) {
            const int64_t me = cnt[e - e0];
            if (me == 0) continue;
            const int64_t base = before * N;
            before += me;
            if (base >= hi) return;
            if (base + me * N <= lo) continue;
            km_moe_expert(body, y, wb + (size_t)e * (size_t)N * w_row_bytes, xb, ids, e, me, base, lo, hi, U, XS, N,
                          K, w_row_bytes, x_row_bytes, nc, rmax, xp, yp);
        }
    }
}

#endif /* KM_MOE_ROWS_H */
