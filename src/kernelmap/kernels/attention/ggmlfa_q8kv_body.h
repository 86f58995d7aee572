/* attention/ggmlfa_q8kv_body.h — the family body of llama.cpp's flash attention over a q8_0 KV cache: contracts
 * attention.q8_0kv.ggml_fa.v1, attention_kq.q8_0kv.ggml_fa.v1 and their rotated forms
 * attention.q8_0kv_rot.ggml_fa.v1, attention_kq.q8_0kv_rot.ggml_fa.v1, written once against the lanes interface
 * (common/km_lanes.h); every ISA variant of the four providers is an instantiation of it.
 *
 * Numerics: exactly attention/ggmlfa_q8kv_ref.c. Family parameters: per_score (0: Q multiplied by scale before it
 * is quantized; 1: each score multiplied by scale) and rot (llama.cpp's Hadamard rotations: Q by common/km_fwht.h
 * in blocks of the largest power of two dividing D before it is quantized, the output back in blocks of 64). Per
 * (row, head) item: qs = q * scale (kl_fv_mul) or q; the q8_0 blocks of qs by kqa_q8_0_rne_at (the activation
 * quantizer's lanes form, = km_q8_0_rne_block_ref); per key in increasing position: the score in
 * ggml_vec_dot_q8_0_q8_0's order (kl_q32_dot: lane l = the exact int32 sum of the 4 products 4l .. 4l+3 as f32,
 * acc = kl_f8_fma(f32(d_k) * f32(d_q), lane, acc) per block, kl_f8_fold: ((a0+a4)+(a2+a6))+((a1+a5)+(a3+a7)), the
 * ref's h/g fold); the online softmax step in scalar f32 (libm expf, kl_f32_* ops); VKQ f32 [D] scaled by ms
 * (kl_fv_mul) and added V * vs with V = (float)q * f32(d) (kl_fv_cvt_i8, kl_fv_mul: exact) by kl_fv_fma;
 * S = fma(S, ms, vs); y = VKQ * (S == 0 ? 0 : 1/S). Every float operation is one IEEE operation on the ref's
 * operands, so the bits equal the ref's on every ISA.
 * Op, layout, partition: as the ref (head-major q8_0 caches [Hkv][C][D/32 blocks], key j in cell j mod C, items
 * m*Hq + h in ranges of equal work by attention_ggmlfa_part.h). D % 32 == 0 (D % 64 == 0 for rot), D <= 512.
 * No schedule parameters.
 */
#ifndef KM_GGMLFA_Q8KV_BODY_H
#define KM_GGMLFA_Q8KV_BODY_H

#include <math.h>

#include "km_actquant.h"
#include "km_fwht.h"
#include "attention_ggmlfa_part.h"

#define KFQ_DMAX 512
#define KFQ_NB (KFQ_DMAX / KM_QK8_0)

KL_INLINE void kfq_attention(float *y, const float *q, const void *k_cache, const void *v_cache, int64_t M,
                             int64_t Hq, int64_t Hkv, int64_t D, int64_t C, int64_t pos, float scale, int64_t window,
                             const int per_score, const int rot, int ith, int nth) {
    const km_block_q8_0 *kc = (const km_block_q8_0 *)k_cache; /* [Hkv][C][D/32] */
    const km_block_q8_0 *vc = (const km_block_q8_0 *)v_cache; /* [Hkv][C][D/32] */
    const int64_t group = Hq / Hkv, nb = D / KM_QK8_0, nk = rot ? kfw_rot_k(D) : 0;
    int64_t lo, hi;
    km_fa_part(M, Hq, pos, window, ith, nth, &lo, &hi);
    float qs[KFQ_DMAX] __attribute__((aligned(64)));
    float tmp[KFQ_DMAX] __attribute__((aligned(64)));
    float vkq[KFQ_DMAX] __attribute__((aligned(64)));
    km_block_q8_0 qq[KFQ_NB];
    kl_q32xb xb[KFQ_NB];
    float dq[KFQ_NB];
    const kl_fv vscale = kl_fv_set1(scale);
    for (int64_t it = lo; it < hi; it++) {
        const int64_t m = it / Hq, kvh = (it % Hq) / group, p = pos + m;
        const int64_t j0 = (window > 0 && p - window + 1 > 0) ? p - window + 1 : 0;
        const float *qr = q + it * D;
        for (int64_t d = 0; d < D; d += KL_FV_LANES) {
            const kl_fv v = kl_fv_loadu(qr + d);
            kl_fv_storeu(qs + d, per_score ? v : kl_fv_mul(v, vscale));
            kl_fv_storeu(vkq + d, kl_fv_zero());
        }
        if (rot) {
            for (int64_t b = 0; b < D; b += nk) kfw_fwht(tmp + b, qs + b, nk);
            for (int64_t d = 0; d < D; d += KL_FV_LANES) kl_fv_storeu(qs + d, kl_fv_loadu(tmp + d));
        }
        for (int64_t b = 0; b < nb; b++) {
            kqa_q8_0_rne_at(&qq[b], qs + b * KM_QK8_0);
            kl_q32xb_prep(&xb[b], qq[b].qs, KL_Q32_Q8_0);
            dq[b] = kl_h2f(qq[b].d);
        }
        float big_m = -INFINITY, big_s = 0.0f;
        for (int64_t j = j0; j <= p; j++) {
            const km_block_q8_0 *kr = kc + (kvh * C + j % C) * nb;
            const km_block_q8_0 *vr = vc + (kvh * C + j % C) * nb;
            kl_f8 acc = kl_f8_zero();
            for (int64_t b = 0; b < nb; b++) {
                const kl_f8 dot = kl_q32_dot(kl_q32w_load((const uint8_t *)(kr + b), KL_Q32_Q8_0), &xb[b], KL_Q32_Q8_0);
                acc = kl_f8_fma(kl_f8_set1(kl_f32_mul(kl_h2f(kr[b].d), dq[b])), dot, acc);
            }
            float s = kl_f8_fold(acc);
            if (per_score) s = kl_f32_mul(s, scale);
            float ms = 1.0f, vs = 1.0f;
            if (s > big_m) {
                ms = expf(kl_f32_sub(big_m, s));
                big_m = s;
                const kl_fv vms = kl_fv_set1(ms);
                for (int64_t d = 0; d < D; d += KL_FV_LANES) kl_fv_storeu(vkq + d, kl_fv_mul(kl_fv_loadu(vkq + d), vms));
            } else {
                vs = expf(kl_f32_sub(s, big_m));
            }
            const kl_fv vvs = kl_fv_set1(vs);
            for (int64_t b = 0; b < nb; b++) {
                const kl_fv vd = kl_fv_set1(kl_h2f(vr[b].d));
                for (int i = 0; i < KM_QK8_0; i += KL_FV_LANES) {
                    const int64_t d = b * KM_QK8_0 + i;
                    const kl_fv v = kl_fv_mul(kl_fv_cvt_i8(vr[b].qs + i), vd);
                    kl_fv_storeu(vkq + d, kl_fv_fma(v, vvs, kl_fv_loadu(vkq + d)));
                }
            }
            big_s = kl_f32_fma(big_s, ms, vs);
        }
        const kl_fv inv = kl_fv_set1(big_s == 0.0f ? 0.0f : 1.0f / big_s);
        float *yr = y + it * D;
        if (rot) {
            for (int64_t d = 0; d < D; d += KL_FV_LANES) kl_fv_storeu(vkq + d, kl_fv_mul(kl_fv_loadu(vkq + d), inv));
            for (int64_t b = 0; b < D; b += KFW_ROT_V) kfw_fwht(yr + b, vkq + b, KFW_ROT_V);
        } else {
            for (int64_t d = 0; d < D; d += KL_FV_LANES) kl_fv_storeu(yr + d, kl_fv_mul(kl_fv_loadu(vkq + d), inv));
        }
    }
}

#endif /* KM_GGMLFA_Q8KV_BODY_H */
