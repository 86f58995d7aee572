/* km_q8_0_ref.h — the scalar q8_0 steps llama.cpp's x86 CPU backend uses, shared by the scalar oracles that state them.
 *
 * km_q8_0_rne_block_ref: one q8_0 block by the rule of contract quantize_act.q8_0.rne.v1 (llama.cpp's x86
 * quantize_row_q8_0, the CPU from_float of GGML_TYPE_Q8_0): amax = max |x_i| over the 32 values (exact in any
 * order); d = amax / 127.0f; id = (amax != 0) ? 127.0f / amax : 0.0f (127/amax, not 1/d); y.d = fp16(d) rounded
 * to nearest even; y.qs[i] = (int8) rint(x_i * id) (default rounding mode: halves to even), in [-127, 127].
 * Inputs must be finite. Used by quantize/q8_0_rne_ref.c (activations), kv_append/q8_0_ref.c (llama.cpp's KV
 * write into a q8_0 cache) and attention/ggmlfa_q8kv_ref.c (Q converted to K's vec_dot type).
 *
 * km_q8_0_dot_ggml_ref: one q8_0 x q8_0 row dot in ggml_vec_dot_q8_0_q8_0's x86 order: acc[0..7] = +0; for each
 * block b in increasing order: lane[l] = exact int32 sum of the 4 products w[4l+i] * x[4l+i], i = 0..3;
 * t = f32(fp16(w.d) * fp16(x.d)); acc[l] = fmaf(t, (float)lane[l], acc[l]). Then h[l] = acc[l] + acc[l+4]
 * (l < 4), g0 = h0 + h2, g1 = h1 + h3, result g0 + g1, each an f32 add. Used by linear/q8_0_q8_0_ggml_ref.c
 * (linear.q8_0.q8_0.ggml.v1) and attention/ggmlfa_q8kv_ref.c (each score of the q8_0-KV flash attention).
 *
 * km_fwht_ref: the Hadamard rotation llama.cpp (0.3.36) applies around a quantized KV cache (Q and K rows before
 * the cache and the score, V rows before the cache, the attention output after it; ggml-cpu's fwht, the CPU path
 * of a mul_mat hinted GGML_HINT_SRC0_IS_HADAMARD) over n values, n a power of two: y[j] = x[j] * s with
 * s = 1.0f / sqrtf((float)n) (f32); then for len = 1, 2, 4, .., n/2 and every block of 2*len values, each pair
 * (u, v) = (y[i + j], y[i + len + j]) becomes (u + v, u - v), each one f32 add. llama.cpp's rotation sizes:
 * K (and Q) rows in blocks of the largest power of two dividing the head size D (km_kv_rot_k; D % 64 == 0),
 * V rows and the output in blocks of 64 (KM_KV_ROT_V).
 */
#ifndef KM_Q8_0_REF_H
#define KM_Q8_0_REF_H

#include <math.h>

#include "km_common.h"

static inline void km_q8_0_rne_block_ref(km_block_q8_0 *y, const float *x) {
    float amax = 0.0f;
    for (int i = 0; i < KM_QK8_0; i++) {
        const float a = fabsf(x[i]);
        if (a > amax) amax = a;
    }
    const float d = amax / 127.0f;
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    y->d = km_fp32_to_fp16(d);
    for (int i = 0; i < KM_QK8_0; i++) y->qs[i] = (int8_t)rintf(x[i] * id);
}

/* One block of km_q8_0_dot_ggml_ref's chains: acc[l] = fmaf(t, (float)lane[l], acc[l]) with lane[l] the exact int32
 * sum of w[4l+i] * x[4l+i] (a reader of a repacked weight layout passes the block's 32 values it rebuilt). */
static inline void km_q8_0_lanes_ggml_ref(float acc[8], float t, const int8_t *w, const int8_t *x) {
    for (int l = 0; l < 8; l++) {
        int32_t lane = 0;
        for (int i = 0; i < 4; i++) lane += (int32_t)w[4 * l + i] * (int32_t)x[4 * l + i];
        acc[l] = fmaf(t, (float)lane, acc[l]);
    }
}

/* The end of km_q8_0_dot_ggml_ref: (acc0 + acc4) + (acc2 + acc6), (acc1 + acc5) + (acc3 + acc7), their sum. */
static inline float km_q8_0_fold_ggml_ref(const float acc[8]) {
    float h[4];
    for (int l = 0; l < 4; l++) h[l] = acc[l] + acc[l + 4];
    const float g0 = h[0] + h[2];
    const float g1 = h[1] + h[3];
    return g0 + g1;
}

static inline float km_q8_0_dot_ggml_ref(const km_block_q8_0 *w, const km_block_q8_0 *x, int64_t nb) {
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int64_t b = 0; b < nb; b++)
        km_q8_0_lanes_ggml_ref(acc, km_fp16_to_fp32(w[b].d) * km_fp16_to_fp32(x[b].d), w[b].qs, x[b].qs);
    return km_q8_0_fold_ggml_ref(acc);
}

static inline void km_fwht_ref(float *y, const float *x, int64_t n) {
    const float s = 1.0f / sqrtf((float)n);
    for (int64_t j = 0; j < n; j++) y[j] = x[j] * s;
    for (int64_t len = 1; len < n; len <<= 1) {
        for (int64_t i = 0; i < n; i += 2 * len) {
            for (int64_t j = i; j < i + len; j++) {
                const float u = y[j], v = y[j + len];
                y[j] = u + v;
                y[j + len] = u - v;
            }
        }
    }
}

#define KM_KV_ROT_V 64

/* llama.cpp's rotation block of K and Q for head size D (a multiple of 64): the largest power of two dividing D */
static inline int64_t km_kv_rot_k(int64_t D) {
    int64_t n = 64;
    while (D % (2 * n) == 0) n *= 2;
    return n;
}

#endif /* KM_Q8_0_REF_H */
