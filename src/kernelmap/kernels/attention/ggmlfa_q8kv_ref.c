/* attention/ggmlfa_q8kv_ref.c — km_attention_(kq_)q8_0kv(_rot)_ggmlfa__ref: the scalar oracles of contracts
 * attention.q8_0kv.ggml_fa.v1, attention_kq.q8_0kv.ggml_fa.v1 and their rotated forms attention.q8_0kv_rot.ggml_fa.v1,
 * attention_kq.q8_0kv_rot.ggml_fa.v1.
 *
 * Op: causal GQA attention of q f32 [M, Hq*D] (row m at position p = pos + m) over the head-major q8_0 caches
 * k_cache, v_cache [Hkv][C][D/32 blocks of 34 bytes] (as kv_append.q8_0.rne.v1 writes them); output y f32
 * [M, Hq*D]. Query head h reads KV head h / (Hq/Hkv); row m sees keys j0 .. p (j0 = p - window + 1 when
 * window > 0 and that is positive, else 0). KV layout as attention.f16kv.ggml_fa.v1 (attention/ggmlfa_ref.c):
 * C cells per head, key j in cell j mod C, keys visited in increasing position whatever the cells, so the
 * bits do not depend on C (ring or full length).
 * Constraints: D a multiple of 32, D <= 512, Hq a multiple of Hkv.
 * Numerics: bit for bit llama.cpp's CPU flash attention with type_k = type_v = q8_0 (ggml flash_attn_ext's
 * one-row path, x86 AVX-512 build, llama.cpp 0.3.36), which runs every row alone on every thread count (ggml
 * splits the keys across threads and tiles query rows only for an f16/f32 cache):
 *   Q is converted to K's vec_dot type q8_0 by quantize_row_q8_0 (common/km_q8_0_ref.h) from
 *     qs = q * scale (attention.q8_0kv: one f32 multiply, ggml_scale of Q ahead of the attention, kq_scale 1:
 *     Gemma's graph) or qs = q (attention_kq.q8_0kv: kq_scale = scale, Llama/Qwen graphs);
 *   s_j = ggml_vec_dot_q8_0_q8_0(K_j, Qq) (common/km_q8_0_ref.h), times scale for attention_kq (one f32
 *     multiply; the Q-scaled contract's kq_scale 1 is no operation);
 *   keys in increasing j; M = -inf, S = 0, VKQ = 0 (f32 [D]); per key:
 *     if s_j > M: ms = expf(M - s_j), M = s_j, VKQ[d] = VKQ[d] * ms, vs = 1; else: ms = 1, vs = expf(s_j - M);
 *     V[d] = (float)qs_d * f32(d_block) (exact: dequantize_row_q8_0); VKQ[d] = fmaf(V[d], vs, VKQ[d]);
 *     S = fmaf(S, ms, vs);
 *   y[d] = VKQ[d] * (S == 0 ? 0 : 1.0f / S).
 * Unlike the f16 cache's contract the running V sum stays f32 (no f16 rounding per step). expf is the C
 * library's (llama.cpp's too). FMA exactly where written; nothing else contracted (-ffp-contract=off).
 * Results do not depend on (ith, nth). Checked against ggml's own outputs (tests/kernels/test_attention_q8kv.py).
 * The _rot contracts are what llama.cpp 0.3.36 computes around the same op for a quantized cache (its graph
 * rotates Q, K and V by Hadamard transforms, unless LLAMA_ATTN_ROT_DISABLE is set): the caches hold K and V rotated
 * (kv_append.q8_0.rot_k.v1 / rot_v.v1); qs is rotated in blocks of km_kv_rot_k(D) (km_fwht_ref) before it is
 * quantized; the normalized output VKQ[d] * inv (one f32 multiply) is rotated back in blocks of 64 (km_fwht_ref,
 * llama.cpp's rotation of the attention output). D % 64 == 0.
 * Partition: (row, head) items it = m*Hq + h in contiguous ranges of equal work (attention_ggmlfa_part.h).
 */
#include <math.h>

#include "km_common.h"
#include "km_expf.h"
#include "attention_ggmlfa_part.h"
#include "km_q8_0_ref.h"

#define KM_FAQ8_DMAX 512

static void q8kv_ref(float *y, const float *q, const void *k_cache, const void *v_cache, int64_t M, int64_t Hq,
        int64_t Hkv, int64_t D, int64_t C, int64_t pos, float scale, int64_t window, int per_score, int rot, int ith,
        int nth) {
    const km_block_q8_0 *kc = (const km_block_q8_0 *)k_cache; /* [Hkv][C][D/32] */
    const km_block_q8_0 *vc = (const km_block_q8_0 *)v_cache; /* [Hkv][C][D/32] */
    const int64_t group = Hq / Hkv, nb = D / KM_QK8_0;
    int64_t lo, hi;
    km_fa_part(M, Hq, pos, window, ith, nth, &lo, &hi);
    for (int64_t it = lo; it < hi; it++) {
        const int64_t m = it / Hq, kvh = (it % Hq) / group, p = pos + m;
        const int64_t j0 = (window > 0 && p - window + 1 > 0) ? p - window + 1 : 0;
        float qs[KM_FAQ8_DMAX];
        km_block_q8_0 qq[KM_FAQ8_DMAX / KM_QK8_0];
        float vkq[KM_FAQ8_DMAX];
        for (int64_t d = 0; d < D; d++) {
            qs[d] = per_score ? q[it * D + d] : q[it * D + d] * scale;
            vkq[d] = 0.0f;
        }
        if (rot) { /* Q in K's rotation */
            float t[KM_FAQ8_DMAX];
            const int64_t nk = km_kv_rot_k(D);
            for (int64_t b = 0; b < D; b += nk) km_fwht_ref(t + b, qs + b, nk);
            for (int64_t d = 0; d < D; d++) qs[d] = t[d];
        }
        for (int64_t b = 0; b < nb; b++) km_q8_0_rne_block_ref(&qq[b], qs + b * KM_QK8_0);
        float big_m = -INFINITY, big_s = 0.0f;
        for (int64_t j = j0; j <= p; j++) {
            const int64_t cell = (kvh * C + j % C) * nb;
            float s = km_q8_0_dot_ggml_ref(kc + cell, qq, nb);
            if (per_score) s = s * scale;
            float ms = 1.0f, vs = 1.0f;
            if (s > big_m) {
                ms = km_expf(big_m - s);
                big_m = s;
                for (int64_t d = 0; d < D; d++) vkq[d] = vkq[d] * ms;
            } else {
                vs = km_expf(s - big_m);
            }
            for (int64_t b = 0; b < nb; b++) {
                const km_block_q8_0 *vb = vc + cell + b;
                const float vd = km_fp16_to_fp32(vb->d);
                for (int i = 0; i < KM_QK8_0; i++) {
                    const int64_t d = b * KM_QK8_0 + i;
                    vkq[d] = fmaf((float)vb->qs[i] * vd, vs, vkq[d]);
                }
            }
            big_s = fmaf(big_s, ms, vs);
        }
        const float inv = big_s == 0.0f ? 0.0f : 1.0f / big_s;
        for (int64_t d = 0; d < D; d++) vkq[d] = vkq[d] * inv;
        if (rot) { /* the output back from V's rotation */
            for (int64_t b = 0; b < D; b += KM_KV_ROT_V) km_fwht_ref(y + it * D + b, vkq + b, KM_KV_ROT_V);
        } else {
            for (int64_t d = 0; d < D; d++) y[it * D + d] = vkq[d];
        }
    }
}

/* The four maps' entry points live in this one unit; each is declared here, since a build that selects one
 * map's variant declares only that one (builds refuse undeclared exports). */
void km_attention_q8_0kv_rot_ggmlfa__ref(float *y, const float *q, const void *k_cache, const void *v_cache,
        int64_t M, int64_t Hq, int64_t Hkv, int64_t D, int64_t C, int64_t pos, float scale, int64_t window, int ith,
        int nth);
void km_attention_kq_q8_0kv_rot_ggmlfa__ref(float *y, const float *q, const void *k_cache, const void *v_cache,
        int64_t M, int64_t Hq, int64_t Hkv, int64_t D, int64_t C, int64_t pos, float scale, int64_t window, int ith,
        int nth);
void km_attention_q8_0kv_ggmlfa__ref(float *y, const float *q, const void *k_cache, const void *v_cache, int64_t M,
        int64_t Hq, int64_t Hkv, int64_t D, int64_t C, int64_t pos, float scale, int64_t window, int ith, int nth);
void km_attention_kq_q8_0kv_ggmlfa__ref(float *y, const float *q, const void *k_cache, const void *v_cache,
        int64_t M, int64_t Hq, int64_t Hkv, int64_t D, int64_t C, int64_t pos, float scale, int64_t window, int ith,
        int nth);

void km_attention_q8_0kv_ggmlfa__ref(float *y, const float *q, const void *k_cache, const void *v_cache, int64_t M,
        int64_t Hq, int64_t Hkv, int64_t D, int64_t C, int64_t pos, float scale, int64_t window, int ith, int nth) {
    q8kv_ref(y, q, k_cache, v_cache, M, Hq, Hkv, D, C, pos, scale, window, 0, 0, ith, nth);
}

void km_attention_q8_0kv_rot_ggmlfa__ref(float *y, const float *q, const void *k_cache, const void *v_cache,
        int64_t M, int64_t Hq, int64_t Hkv, int64_t D, int64_t C, int64_t pos, float scale, int64_t window, int ith,
        int nth) {
    q8kv_ref(y, q, k_cache, v_cache, M, Hq, Hkv, D, C, pos, scale, window, 0, 1, ith, nth);
}

void km_attention_kq_q8_0kv_rot_ggmlfa__ref(float *y, const float *q, const void *k_cache, const void *v_cache,
        int64_t M, int64_t Hq, int64_t Hkv, int64_t D, int64_t C, int64_t pos, float scale, int64_t window, int ith,
        int nth) {
    q8kv_ref(y, q, k_cache, v_cache, M, Hq, Hkv, D, C, pos, scale, window, 1, 1, ith, nth);
}

void km_attention_kq_q8_0kv_ggmlfa__ref(float *y, const float *q, const void *k_cache, const void *v_cache,
        int64_t M, int64_t Hq, int64_t Hkv, int64_t D, int64_t C, int64_t pos, float scale, int64_t window, int ith,
        int nth) {
    q8kv_ref(y, q, k_cache, v_cache, M, Hq, Hkv, D, C, pos, scale, window, 1, 0, ith, nth);
}
