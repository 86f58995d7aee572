/* linear/iq4_nl_ref.h — the scalar statement of linear.iq4_nl.q8_0.ggml.v1 for output columns [n0, n1) (shared by
 * linear/iq4_nl_q8_0_ggml_ref.c, the oracle, and the SIMD variants, which run it for row counts N % 8 != 0).
 *
 * Op: y[m][n] = sum_k dequant(w[n])[k] * dequant(x[m])[k]; w [N,K] iq4_nl in ggml_blocks (value i of a block =
 * km_iq4_nl_values[its nibble] * d), x [M,K] q8_0 rows, y [M,N] f32 row-major. K a multiple of 32.
 * Numerics: llama.cpp's x86 iq4_nl arithmetic (0.3.36, its AVX-512 and AVX2 builds alike), two orders chosen by N:
 * - N % 8 == 0: llama.cpp repacks the weight into 8-row interleaved blocks and runs ggml_gemv_iq4_nl_8x8_q8_0
 *   (ggml_gemm_iq4_nl_8x8_q8_0 on 4 activation rows computes the same values): acc = +0; for each block b in
 *   order: isum = the exact int32 sum of its 32 products v[i] * x[i], t = f32(fp16(w.d)) * f32(fp16(x.d)),
 *   acc = fmaf((float)isum, t, acc); y = acc (q4_0's repacked order, with the table's values).
 * - otherwise ggml_vec_dot_iq4_nl_q8_0: two sets of 8 lanes, acc1 for the even blocks and acc2 for the odd ones,
 *   of the blocks before the last even count: lane[l] = the exact int32 sum of the 4 products at 4l..4l+3,
 *   acc[l] = fmaf(t, (float)lane[l], acc[l]); then a[l] = acc1[l] + acc2[l], h[l] = a[l] + a[l+4] (l < 4),
 *   y = (h0 + h2) + (h1 + h3); an odd last block adds y = fmaf(t, (float)isum, y).
 * Both found by feeding llama.cpp's own functions random data (tests/fixtures/formats/make_iq4_nl_fixtures.py).
 */
#ifndef KM_IQ4_NL_REF_H
#define KM_IQ4_NL_REF_H

#include <math.h>
#include <string.h>

#include "km_common.h"

/* The 32 integer values of one block, in element order. */
static inline void km_iq4nl_unpack(const km_block_iq4_nl *blk, int32_t v[32]) {
    for (int i = 0; i < 16; i++) {
        v[i] = km_iq4_nl_values[blk->qs[i] & 0x0F];
        v[i + 16] = km_iq4_nl_values[blk->qs[i] >> 4];
    }
}

/* Where block b of weight row n is: the GGUF layout's own block, or (c16 refs) one rebuilt into tmp. */
typedef const km_block_iq4_nl *(*km_iq4nl_block_fn)(const void *w, int64_t nb, int64_t n, int64_t b,
                                                    km_block_iq4_nl *tmp);

static inline const km_block_iq4_nl *km_iq4nl_gguf_block(const void *w, int64_t nb, int64_t n, int64_t b,
                                                         km_block_iq4_nl *tmp) {
    (void)tmp;
    return (const km_block_iq4_nl *)w + n * nb + b;
}

/* Columns [n0, n1) of y for all M rows, the weight's blocks from `block`. */
static inline void km_iq4nl_ref_cols_at(float *y, const void *w, km_iq4nl_block_fn block, const void *x, int64_t M,
                                        int64_t N, int64_t K, int64_t n0, int64_t n1) {
    const int64_t nb = K / 32;
    const km_block_q8_0 *xb = (const km_block_q8_0 *)x;
    for (int64_t n = n0; n < n1; n++) {
        for (int64_t m = 0; m < M; m++) {
            float acc[2][8] = {{0}};
            float chain = 0.0f, tail = 0.0f;
            for (int64_t b = 0; b < nb; b++) {
                km_block_iq4_nl tmp;
                const km_block_iq4_nl *wk = block(w, nb, n, b, &tmp);
                const km_block_q8_0 *xk = &xb[m * nb + b];
                int32_t v[32];
                km_iq4nl_unpack(wk, v);
                const float t = km_fp16_to_fp32(wk->d) * km_fp16_to_fp32(xk->d);
                int32_t isum = 0;
                for (int l = 0; l < 8; l++) {
                    int32_t lane = 0;
                    for (int i = 0; i < 4; i++) lane += v[4 * l + i] * (int32_t)xk->qs[4 * l + i];
                    if (b < nb - nb % 2) acc[b % 2][l] = fmaf(t, (float)lane, acc[b % 2][l]);
                    isum += lane;
                }
                chain = fmaf((float)isum, t, chain);
                if (b == nb - 1 && nb % 2) { /* the odd last block after the fold */
                    float a[8], h[4];
                    for (int l = 0; l < 8; l++) a[l] = acc[0][l] + acc[1][l];
                    for (int l = 0; l < 4; l++) h[l] = a[l] + a[l + 4];
                    tail = fmaf(t, (float)isum, (h[0] + h[2]) + (h[1] + h[3]));
                }
            }
            if (N % 8 == 0) {
                y[m * N + n] = chain;
            } else if (nb % 2) {
                y[m * N + n] = tail;
            } else {
                float a[8], h[4];
                for (int l = 0; l < 8; l++) a[l] = acc[0][l] + acc[1][l];
                for (int l = 0; l < 4; l++) h[l] = a[l] + a[l + 4];
                y[m * N + n] = (h[0] + h[2]) + (h[1] + h[3]);
            }
        }
    }
}

/* The same on the GGUF layout (w [N, K] iq4_nl blocks). */
static inline void km_iq4nl_ref_cols(float *y, const void *w, const void *x, int64_t M, int64_t N, int64_t K,
                                     int64_t n0, int64_t n1) {
    km_iq4nl_ref_cols_at(y, w, km_iq4nl_gguf_block, x, M, N, K, n0, n1);
}

/* "iq4_nl_c16" (weights/repack.py): block b of row n rebuilt from its group (d at 32 b + 2 c, nibble byte 4 t + i
 * at S + 256 b + 64 t + 4 c + i, c = n mod 16, S = 32 nb rounded up to 64). */
static inline const km_block_iq4_nl *km_iq4nl_c16_block(const void *w, int64_t nb, int64_t n, int64_t b,
                                                        km_block_iq4_nl *tmp) {
    const int64_t s = (32 * nb + 63) / 64 * 64;
    const uint8_t *grp = (const uint8_t *)w + n / 16 * (s + 256 * nb);
    const int c = (int)(n % 16);
    memcpy(&tmp->d, grp + 32 * b + 2 * c, 2);
    for (int t = 0; t < 4; t++)
        for (int i = 0; i < 4; i++) tmp->qs[4 * t + i] = grp[s + 256 * b + 64 * t + 4 * c + i];
    return tmp;
}

#endif /* KM_IQ4_NL_REF_H */
