/* attention/f16kv_ref.c — km_attention_f16kv__ref: the scalar oracle of contract attention.f16kv.f32.v1.
 *
 * Op: causal GQA attention of q f32 [M, Hq*D] (row m at position p = pos + m) over the head-major
 * caches k_cache, v_cache f16 [Hkv][C][D]; output y f32 [M, Hq*D]. Query head h reads KV head
 * h / (Hq/Hkv). Row m sees keys j with j <= p and, when window > 0, p - j < window (llama.cpp's
 * LLAMA_SWA_TYPE_STANDARD mask: masked iff p - j >= n_swa). The caller guarantees pos + M <= C and
 * that keys 0 .. pos+M-1 are written. Constraints: D a multiple of 16, D <= 512, Hq a multiple of Hkv.
 * Numerics (fixed order, so SIMD variants differ from ref only through exp):
 *   score_j = scale * dot(q, k_j), k_j widened exactly from f16; the dot accumulates element i into
 *     partial (i mod 32) with fmaf in increasing i, then folds the 32 partials pairwise
 *     (p[t] += p[t+16], then +8, +4, +2, +1);
 *   keys are visited in chunks of 32 (online softmax): chunk max cm (a NaN-ignoring scalar max);
 *     if cm > running max M: on the first chunk M = cm, else f = exp(M - cm), acc[d] *= f, L *= f,
 *     M = cm; then w_j = exp(score_j - M); L += w_j in key order (f32); acc[d] = fmaf(w_j, v_j[d], acc[d])
 *     in key order;
 *   y[d] = acc[d] * (1.0f / L).
 * ref uses libm expf; SIMD variants use a vector exp (within 2 ulp), hence the map's rtol/atol.
 * Partition: (row, head) items it = m*Hq + h, km_part over M*Hq; no reduction crosses items.
 */
#include <math.h>

#include "km_common.h"

#define KM_ATT_CHUNK 32
#define KM_ATT_DMAX 512

static float dot_f16(const float *q, const km_half *k, int64_t D) {
    float p[32] = {0.0f};
    for (int64_t i = 0; i < D; i++) p[i & 31] = fmaf(q[i], km_fp16_to_fp32(k[i]), p[i & 31]);
    for (int s = 16; s >= 1; s >>= 1) {
        for (int t = 0; t < s; t++) p[t] += p[t + s];
    }
    return p[0];
}

void km_attention_f16kv__ref(float *y, const float *q, const void *k_cache, const void *v_cache,
        int64_t M, int64_t Hq, int64_t Hkv, int64_t D, int64_t C, int64_t pos, float scale,
        int64_t window, int ith, int nth) {
    const km_half *kc = (const km_half *)k_cache; /* [Hkv][C][D] */
    const km_half *vc = (const km_half *)v_cache; /* [Hkv][C][D] */
    const int64_t group = Hq / Hkv;
    int64_t lo, hi;
    km_part(M * Hq, ith, nth, &lo, &hi);
    for (int64_t it = lo; it < hi; it++) {
        const int64_t m = it / Hq, h = it % Hq, kvh = h / group;
        const int64_t p = pos + m;
        const int64_t j0 = (window > 0 && p - window + 1 > 0) ? p - window + 1 : 0;
        const float *qr = q + it * D; /* [D] */
        float *yr = y + it * D;       /* [D] */
        float acc[KM_ATT_DMAX];       /* [D] */
        for (int64_t d = 0; d < D; d++) acc[d] = 0.0f;
        float run_max = -INFINITY, run_sum = 0.0f;
        int first = 1;
        for (int64_t jc = j0; jc <= p; jc += KM_ATT_CHUNK) {
            const int64_t n = (p + 1 - jc) < KM_ATT_CHUNK ? (p + 1 - jc) : KM_ATT_CHUNK;
            float s[KM_ATT_CHUNK];
            float cm = -INFINITY;
            for (int64_t t = 0; t < n; t++) {
                s[t] = scale * dot_f16(qr, kc + (kvh * C + jc + t) * D, D);
                if (s[t] > cm) cm = s[t];
            }
            if (first) {
                run_max = cm;
                first = 0;
            } else if (cm > run_max) {
                const float f = expf(run_max - cm);
                run_sum *= f;
                for (int64_t d = 0; d < D; d++) acc[d] *= f;
                run_max = cm;
            }
            for (int64_t t = 0; t < n; t++) {
                const float w = expf(s[t] - run_max);
                run_sum += w;
                const km_half *vr = vc + (kvh * C + jc + t) * D;
                for (int64_t d = 0; d < D; d++) acc[d] = fmaf(w, km_fp16_to_fp32(vr[d]), acc[d]);
            }
        }
        const float inv = 1.0f / run_sum;
        for (int64_t d = 0; d < D; d++) yr[d] = acc[d] * inv;
    }
}
