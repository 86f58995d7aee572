/* attention/attention_ggmlfa_split_ref.h — km_fa_split_ref: the scalar N-thread split of llama.cpp's flash
 * attention (f16 K/V), shared by the split contracts' refs: ggmlfa_split_ref.c (the AVX-512 build's score dot)
 * and ggmlfa_dot32_split_ref.c (the AVX2 build's 8-lane dot). The including file defines KM_FA_DOT (the score
 * dot, default km_fa_dot_ref) before including this header; the numerics are stated in ggmlfa_split_ref.c.
 * q16 = f16(q * scale) and each score f32(dot) * kqs: the attention contracts pass (scale, 1), the kq-scaled ones
 * (attention_kq.*: llama.cpp's kq_scale) (1, scale).
 */
#ifndef KM_ATTENTION_GGMLFA_SPLIT_REF_H
#define KM_ATTENTION_GGMLFA_SPLIT_REF_H

#include "km_common.h"
#include "attention_ggmlfa_part.h"
#include "attention_ggmlfa_ref_body.h"
#include "attention_ggmlfa_split.h"

static void km_fa_split_ref(float *y, const float *q, const void *k_cache, const void *v_cache, int64_t M, int64_t Hq,
        int64_t Hkv, int64_t C, int64_t D, int64_t pos, float scale, float kqs, int64_t window, int64_t n_split, int ith,
        int nth) {
    const km_half *kc = (const km_half *)k_cache; /* [Hkv][C][D] */
    const km_half *vc = (const km_half *)v_cache; /* [Hkv][C][D] */
    const int64_t group = Hq / Hkv;
    int64_t lo, hi;
    km_fa_part(M, Hq, pos, window, ith, nth, &lo, &hi);
    for (int64_t it = lo; it < hi; it++) {
        const int64_t m = it / Hq, h = it % Hq, kvh = h / group;
        const int64_t p = pos + m;
        const int64_t j0 = (window > 0 && p - window + 1 > 0) ? p - window + 1 : 0;
        const km_half *kh = kc + kvh * C * D, *vh = vc + kvh * C * D;
        km_half q16[KM_FA_DMAX]; /* [D] */
        km_half vkq[KM_FA_DMAX]; /* [D] */
        float part[KM_FA_DMAX];  /* [D] f32 of one range's VKQ */
        float acc[KM_FA_DMAX];   /* [D] merged */
        km_fa_ref_q16(q16, q + it * D, scale, D);
        if (!km_fa_is_split(p)) { /* the plain one-row path of ggml_fa.v1 */
            km_fa_ref_row(y + it * D, q16, kh, vh, D, C, j0, p, kqs);
            continue;
        }
        float fin_m = -INFINITY, fin_s = 0.0f;
        for (int64_t d = 0; d < D; d++) acc[d] = 0.0f;
        for (int64_t t = 0; t < n_split; t++) {
            int64_t js, je;
            km_fa_split_keys(p, j0, n_split, t, &js, &je);
            float big_m = -INFINITY, big_s = 0.0f;
            for (int64_t d = 0; d < D; d++) vkq[d] = 0;
            km_fa_ref_keys(q16, kh, vh, D, C, js, je, kqs, &big_m, &big_s, vkq);
            for (int64_t d = 0; d < D; d++) part[d] = km_fp16_to_fp32(vkq[d]);
            km_fa_split_merge(&fin_m, &fin_s, acc, big_m, big_s, part, D);
        }
        km_fa_split_store(y + it * D, acc, fin_s, D);
    }
}

#endif /* KM_ATTENTION_GGMLFA_SPLIT_REF_H */
