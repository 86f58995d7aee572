/* attention/attention_ggmlfa_ref_body.h — the scalar steps of llama.cpp's one-row flash attention, shared by
 * the ref kernels of contracts attention.f16kv.ggml_fa.v1 (ggmlfa_ref.c) and attention.f16kv.ggml_fa_split<N>.v1
 * (ggmlfa_split_ref.c). The roundings are the ones ggmlfa_ref.c's contract comment lists: Q16 = f16_rne(q *
 * scale); the score dot of ggmlfa_dot_ref.h; keys in increasing j with the online softmax (M, S f32, VKQ f16
 * rounded at every scale and FMA step, libm expf). km_fa_ref_keys leaves the state unnormalized, so a caller can merge partial states.
 */
#ifndef KM_ATTENTION_GGMLFA_REF_BODY_H
#define KM_ATTENTION_GGMLFA_REF_BODY_H

#include <math.h>
#include <stdint.h>

#include "km_common.h"
#include "km_expf.h"
#include "ggmlfa_dot_ref.h"

#define KM_FA_DMAX 512

/* The score dot: the AVX-512 build's unless the including file names another of ggmlfa_dot_ref.h (the dot32 ref). */
#ifndef KM_FA_DOT
#define KM_FA_DOT km_fa_dot_ref
#endif

/* q16[d] = f16_rne(qr[d] * scale), d < D */
static inline void km_fa_ref_q16(km_half *q16, const float *qr, float scale, int64_t D) {
    for (int64_t d = 0; d < D; d++) q16[d] = km_fp32_to_fp16(qr[d] * scale);
}

/* Keys js .. je (positions, increasing; none when js > je) of one KV head (kh, vh: [C][D] cells, key j in cell
 * j mod C: the ring layout, the full-length one when C > je) into the running state: *big_m (M), *big_s (S),
 * vkq f16 [D]. Each score is f32(dot) * kqs (llama.cpp's kq_scale: 1 where the scale went into q16, exact). */
static inline void km_fa_ref_keys(const km_half *q16, const km_half *kh, const km_half *vh, int64_t D, int64_t C,
        int64_t js, int64_t je, float kqs, float *big_m, float *big_s, km_half *vkq) {
    float mm = *big_m, ss = *big_s;
    for (int64_t j = js; j <= je; j++) {
        const float s = KM_FA_DOT(kh + (j % C) * D, q16, D) * kqs;
        float ms = 1.0f, vs = 1.0f;
        if (s > mm) {
            ms = km_expf(mm - s);
            mm = s;
            for (int64_t d = 0; d < D; d++) vkq[d] = km_fp32_to_fp16(km_fp16_to_fp32(vkq[d]) * ms);
        } else {
            vs = km_expf(s - mm);
        }
        const km_half *vr = vh + (j % C) * D;
        for (int64_t d = 0; d < D; d++) {
            vkq[d] = km_fp32_to_fp16(fmaf(km_fp16_to_fp32(vr[d]), vs, km_fp16_to_fp32(vkq[d])));
        }
        ss = fmaf(ss, ms, vs);
    }
    *big_m = mm;
    *big_s = ss;
}

/* One row and head over keys j0 .. p from a fresh state, normalized: y[d] = f32(VKQ[d]) * (S == 0 ? 0 : 1/S);
 * scores times kqs (km_fa_ref_keys). */
static inline void km_fa_ref_row(float *y, const km_half *q16, const km_half *kh, const km_half *vh, int64_t D,
        int64_t C, int64_t j0, int64_t p, float kqs) {
    km_half vkq[KM_FA_DMAX]; /* [D] */
    for (int64_t d = 0; d < D; d++) vkq[d] = 0;
    float big_m = -INFINITY, big_s = 0.0f;
    km_fa_ref_keys(q16, kh, vh, D, C, j0, p, kqs, &big_m, &big_s, vkq);
    const float inv = big_s == 0.0f ? 0.0f : 1.0f / big_s;
    for (int64_t d = 0; d < D; d++) y[d] = km_fp16_to_fp32(vkq[d]) * inv;
}

#endif /* KM_ATTENTION_GGMLFA_REF_BODY_H */
