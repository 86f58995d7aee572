/* attention/attention_ref_body.h — the scalar attention oracle shared by every KV storage type.
 *
 * Included by attention/{f16kv,f32kv}_ref.c after they define km_kv_t (the cache element type) and
 * kv_to_f32() (its exact widening to f32). The numerics are stated in those files' contracts.
 */
#ifndef KM_ATTENTION_REF_BODY_H
#define KM_ATTENTION_REF_BODY_H

#define KM_ATT_CHUNK 32
#define KM_ATT_DMAX 512

static float km_att_dot(const float *q, const km_kv_t *k, int64_t D) {
    float p[32] = {0.0f};
    for (int64_t i = 0; i < D; i++) p[i & 31] = fmaf(q[i], kv_to_f32(k[i]), p[i & 31]);
    for (int s = 16; s >= 1; s >>= 1) {
        for (int t = 0; t < s; t++) p[t] += p[t + s];
    }
    return p[0];
}

/* Thread ith's share of the (row, head) items of one attention call (see the including file). */
static void km_attention_run(float *y, const float *q, const void *k_cache, const void *v_cache,
        int64_t M, int64_t Hq, int64_t Hkv, int64_t D, int64_t C, int64_t pos, float scale,
        int64_t window, int ith, int nth) {
    const km_kv_t *kc = (const km_kv_t *)k_cache; /* [Hkv][C][D] */
    const km_kv_t *vc = (const km_kv_t *)v_cache; /* [Hkv][C][D] */
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
                s[t] = scale * km_att_dot(qr, kc + (kvh * C + jc + t) * D, D);
                if (s[t] > cm) cm = s[t];
            }
            if (first) {
                run_max = cm;
                first = 0;
            } else if (cm > run_max) {
                const float f = km_expf(run_max - cm);
                run_sum *= f;
                for (int64_t d = 0; d < D; d++) acc[d] *= f;
                run_max = cm;
            }
            for (int64_t t = 0; t < n; t++) {
                const float w = km_expf(s[t] - run_max);
                run_sum += w;
                const km_kv_t *vr = vc + (kvh * C + jc + t) * D;
                for (int64_t d = 0; d < D; d++) acc[d] = fmaf(w, kv_to_f32(vr[d]), acc[d]);
            }
        }
        const float inv = 1.0f / run_sum;
        for (int64_t d = 0; d < D; d++) yr[d] = acc[d] * inv;
    }
}

#endif
