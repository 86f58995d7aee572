/* attention/attention_ggmlfa_softmax.h — the online-softmax scalars of llama.cpp's one-row flash attention with the
 * C library's expf, key by key: the fallback of the SIMD variants (attention_ggmlfa_avx2_body.h,
 * attention_ggmlfa_avx512_body.h) when their vector expf fails its self-check.
 *
 * For keys k < nk of head g (scores sc[k], running *big_m = M and *big_s = S): if s > M, ms = expf(M - s),
 * M = s, vs = 1 and bit g of nmask[k] is set (VKQ must be rescaled); else ms = 1, vs = expf(s - M);
 * S = fmaf(S, ms, vs). The values the contract gives, in key order.
 */
#ifndef KM_ATTENTION_GGMLFA_SOFTMAX_H
#define KM_ATTENTION_GGMLFA_SOFTMAX_H

#include <math.h>
#include <stdint.h>

static inline void km_fa_softmax_libm(const float *sc, float *ms, float *vs, uint8_t *nmask, int g, int64_t nk,
        float *big_m, float *big_s) {
    float mm = *big_m, ss = *big_s;
    for (int64_t k = 0; k < nk; k++) {
        const float s = sc[k];
        float m1 = 1.0f, v1 = 1.0f;
        if (s > mm) {
            m1 = expf(mm - s);
            mm = s;
            nmask[k] |= (uint8_t)(1u << g);
        } else {
            v1 = expf(s - mm);
        }
        ms[k] = m1;
        vs[k] = v1;
        ss = fmaf(ss, m1, v1);
    }
    *big_m = mm;
    *big_s = ss;
}

#endif /* KM_ATTENTION_GGMLFA_SOFTMAX_H */
