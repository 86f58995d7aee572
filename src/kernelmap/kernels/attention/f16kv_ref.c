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

typedef km_half km_kv_t;

static inline float kv_to_f32(km_kv_t x) { return km_fp16_to_fp32(x); }

#include "km_expf.h"
#include "attention_ref_body.h"

void km_attention_f16kv__ref(float *y, const float *q, const void *k_cache, const void *v_cache,
        int64_t M, int64_t Hq, int64_t Hkv, int64_t D, int64_t C, int64_t pos, float scale,
        int64_t window, int ith, int nth) {
    km_attention_run(y, q, k_cache, v_cache, M, Hq, Hkv, D, C, pos, scale, window, ith, nth);
}
