/* attention/attention_ggmlfa_kq_ref.h — km_fa_kq_ref: the scalar attention_kq (llama.cpp's flash attention with
 * kq_scale: Q rounded to f16 unscaled, each score times the scale), shared by the refs of
 * attention_kq.f16kv.ggml_fa.v1 (ggmlfa_kq_ref.c: the AVX-512 build's score dot) and
 * attention_kq.f16kv.ggml_fa_dot32.v1 (ggmlfa_kq_dot32_ref.c: the AVX2 build's 8-lane dot). The including file may
 * define KM_FA_DOT (the score dot, default km_fa_dot_ref) before including this header; the numerics are stated in
 * ggmlfa_kq_ref.c.
 */
#ifndef KM_ATTENTION_GGMLFA_KQ_REF_H
#define KM_ATTENTION_GGMLFA_KQ_REF_H

#include <math.h>

#include "km_common.h"
#include "km_expf.h"
#include "attention_ggmlfa_part.h"
#include "ggmlfa_dot_ref.h"

#ifndef KM_FA_DOT
#define KM_FA_DOT km_fa_dot_ref
#endif

#define KM_FAKQ_DMAX 512

static void km_fa_kq_ref(float *y, const float *q, const void *k_cache, const void *v_cache,
        int64_t M, int64_t Hq, int64_t Hkv, int64_t D, int64_t C, int64_t pos, float scale,
        int64_t window, int ith, int nth) {
    const km_half *kc = (const km_half *)k_cache; /* [Hkv][C][D] */
    const km_half *vc = (const km_half *)v_cache; /* [Hkv][C][D] */
    const int64_t group = Hq / Hkv;
    int64_t lo, hi;
    km_fa_part(M, Hq, pos, window, ith, nth, &lo, &hi);
    km_half q16[KM_FAKQ_DMAX]; /* [D] */
    float vkq[KM_FAKQ_DMAX];   /* [D] f16 values held in f32 */
    for (int64_t it = lo; it < hi; it++) {
        const int64_t m = it / Hq, kvh = (it % Hq) / group, p = pos + m;
        const int64_t j0 = (window > 0 && p - window + 1 > 0) ? p - window + 1 : 0;
        for (int64_t d = 0; d < D; d++) {
            q16[d] = km_fp32_to_fp16(q[it * D + d]);
            vkq[d] = 0.0f;
        }
        float big_m = -INFINITY, big_s = 0.0f;
        for (int64_t j = j0; j <= p; j++) {
            const float s = KM_FA_DOT(kc + (kvh * C + j % C) * D, q16, D) * scale;
            float ms = 1.0f, vs = 1.0f;
            if (s > big_m) {
                ms = km_expf(big_m - s);
                big_m = s;
                for (int64_t d = 0; d < D; d++) vkq[d] = km_fp16_to_fp32(km_fp32_to_fp16(vkq[d] * ms));
            } else {
                vs = km_expf(s - big_m);
            }
            const km_half *vr = vc + (kvh * C + j % C) * D;
            for (int64_t d = 0; d < D; d++) {
                vkq[d] = km_fp16_to_fp32(km_fp32_to_fp16(fmaf(km_fp16_to_fp32(vr[d]), vs, vkq[d])));
            }
            big_s = fmaf(big_s, ms, vs);
        }
        const float inv = big_s == 0.0f ? 0.0f : 1.0f / big_s;
        for (int64_t d = 0; d < D; d++) y[it * D + d] = vkq[d] * inv;
    }
}

#endif /* KM_ATTENTION_GGMLFA_KQ_REF_H */
