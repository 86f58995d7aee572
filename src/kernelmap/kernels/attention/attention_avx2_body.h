/* attention/attention_avx2_body.h — the AVX2 attention body shared by every KV storage type.
 *
 * Included by attention/{f16kv,f32kv}_avx2.c after they define km_kv_t (the cache element type)
 * and loadkv() (one vector of K or V widened to f32). The numerics are stated in those files'
 * contracts; this header only holds the loops they share, so both variants run the same op sequence.
 */
#ifndef KM_ATTENTION_AVX2_BODY_H
#define KM_ATTENTION_AVX2_BODY_H

#define KM_ATT_CHUNK 32
#define KM_ATT_DMAX 512
#define KM_ATT_GMAX 2
#define KM_INLINE static inline __attribute__((always_inline))

static inline __m256 vexp(__m256 x) {
    x = _mm256_min_ps(_mm256_set1_ps(89.0f), x);
    const __m256 small = _mm256_cmp_ps(x, _mm256_set1_ps(-86.5f), _CMP_LT_OQ);
    x = _mm256_max_ps(_mm256_set1_ps(-86.5f), x);
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r);
    p = _mm256_add_ps(p, _mm256_set1_ps(1.0f));
    const __m256i bits = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(126)), 23);
    const __m256 e = _mm256_mul_ps(_mm256_mul_ps(p, _mm256_castsi256_ps(bits)), _mm256_set1_ps(2.0f));
    return _mm256_blendv_ps(e, _mm256_setzero_ps(), small);
}

static inline float sexp(float x) { return _mm_cvtss_f32(_mm256_castps256_ps128(vexp(_mm256_set1_ps(x)))); }

/* The contract's fold of 32 partials (a0..a3: i mod 32 in 0..7, 8..15, 16..23, 24..31): 16, 8, 4, 2, 1. */
static inline float fold(__m256 a0, __m256 a1, __m256 a2, __m256 a3) {
    const __m256 h = _mm256_add_ps(_mm256_add_ps(a0, a2), _mm256_add_ps(a1, a3));
    const __m128 q = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    const __m128 r = _mm_add_ps(q, _mm_movehl_ps(q, q));
    return _mm_cvtss_f32(_mm_add_ss(r, _mm_shuffle_ps(r, r, 1)));
}

/* out[g] = scale * dot(q + g*D, k) for G heads sharing one key row k [D]. */
KM_INLINE void dots(const int G, const float *q, const km_kv_t *k, int64_t D, float scale, float *out) {
    __m256 a[KM_ATT_GMAX][4];
    for (int g = 0; g < G; g++) a[g][0] = a[g][1] = a[g][2] = a[g][3] = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= D; i += 32) {
        const __m256 k0 = loadkv(k + i), k1 = loadkv(k + i + 8), k2 = loadkv(k + i + 16), k3 = loadkv(k + i + 24);
        for (int g = 0; g < G; g++) {
            const float *qg = q + g * D + i;
            a[g][0] = _mm256_fmadd_ps(_mm256_loadu_ps(qg), k0, a[g][0]);
            a[g][1] = _mm256_fmadd_ps(_mm256_loadu_ps(qg + 8), k1, a[g][1]);
            a[g][2] = _mm256_fmadd_ps(_mm256_loadu_ps(qg + 16), k2, a[g][2]);
            a[g][3] = _mm256_fmadd_ps(_mm256_loadu_ps(qg + 24), k3, a[g][3]);
        }
    }
    if (i < D) {
        const __m256 k0 = loadkv(k + i), k1 = loadkv(k + i + 8);
        for (int g = 0; g < G; g++) {
            a[g][0] = _mm256_fmadd_ps(_mm256_loadu_ps(q + g * D + i), k0, a[g][0]);
            a[g][1] = _mm256_fmadd_ps(_mm256_loadu_ps(q + g * D + i + 8), k1, a[g][1]);
        }
    }
    for (int g = 0; g < G; g++) out[g] = scale * fold(a[g][0], a[g][1], a[g][2], a[g][3]);
}

/* acc[g][d] = fma(w[g][t], v_t[d], acc[g][d]) for keys t in order, 8 values of d at a time. */
KM_INLINE void accumulate(const int G, float (*acc)[KM_ATT_DMAX], float (*w)[KM_ATT_CHUNK], const km_kv_t *v,
                          int64_t n, int64_t D) {
    for (int64_t d = 0; d < D; d += 8) {
        __m256 va[KM_ATT_GMAX];
        for (int g = 0; g < G; g++) va[g] = _mm256_loadu_ps(acc[g] + d);
        for (int64_t t = 0; t < n; t++) {
            const __m256 vv = loadkv(v + t * D + d);
            for (int g = 0; g < G; g++) va[g] = _mm256_fmadd_ps(_mm256_set1_ps(w[g][t]), vv, va[g]);
        }
        for (int g = 0; g < G; g++) _mm256_storeu_ps(acc[g] + d, va[g]);
    }
}

static inline void weights(float *wrow, const float *srow, float mx) {
    for (int t = 0; t < KM_ATT_CHUNK; t += 8) {
        _mm256_storeu_ps(wrow + t, vexp(_mm256_sub_ps(_mm256_loadu_ps(srow + t), _mm256_set1_ps(mx))));
    }
}

static inline void rescale(float *a, int64_t D, float f) {
    for (int64_t d = 0; d < D; d += 8) _mm256_storeu_ps(a + d, _mm256_mul_ps(_mm256_loadu_ps(a + d), _mm256_set1_ps(f)));
}

static inline void finish(float *yr, const float *a, int64_t D, float inv) {
    for (int64_t d = 0; d < D; d += 8) _mm256_storeu_ps(yr + d, _mm256_mul_ps(_mm256_loadu_ps(a + d), _mm256_set1_ps(inv)));
}

/* G consecutive query heads of one row (q, y: [G][D]) against KV head rows k, v [C][D], keys j0..p. */
KM_INLINE void attend(const int G, float *y, const float *q, const km_kv_t *k, const km_kv_t *v, int64_t D,
                      int64_t j0, int64_t p, float scale) {
    float acc[KM_ATT_GMAX][KM_ATT_DMAX];
    float s[KM_ATT_GMAX][KM_ATT_CHUNK], w[KM_ATT_GMAX][KM_ATT_CHUNK];
    float run_max[KM_ATT_GMAX], run_sum[KM_ATT_GMAX];
    for (int g = 0; g < G; g++) {
        memset(acc[g], 0, (size_t)D * sizeof(float));
        run_max[g] = -INFINITY;
        run_sum[g] = 0.0f;
    }
    int first = 1;
    for (int64_t jc = j0; jc <= p; jc += KM_ATT_CHUNK) {
        const int64_t n = (p + 1 - jc) < KM_ATT_CHUNK ? (p + 1 - jc) : KM_ATT_CHUNK;
        for (int64_t t = 0; t < n; t++) {
            float o[KM_ATT_GMAX];
            dots(G, q, k + (jc + t) * D, D, scale, o);
            for (int g = 0; g < G; g++) s[g][t] = o[g];
        }
        for (int g = 0; g < G; g++) {
            for (int64_t t = n; t < KM_ATT_CHUNK; t++) s[g][t] = -INFINITY;
            float cm = -INFINITY;
            for (int64_t t = 0; t < n; t++) {
                if (s[g][t] > cm) cm = s[g][t];
            }
            if (first) {
                run_max[g] = cm;
            } else if (cm > run_max[g]) {
                const float f = sexp(run_max[g] - cm);
                run_sum[g] *= f;
                rescale(acc[g], D, f);
                run_max[g] = cm;
            }
            weights(w[g], s[g], run_max[g]);
            for (int64_t t = 0; t < n; t++) run_sum[g] += w[g][t];
        }
        first = 0;
        accumulate(G, acc, w, v + jc * D, n, D);
    }
    for (int g = 0; g < G; g++) finish(y + g * D, acc[g], D, 1.0f / run_sum[g]);
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
    for (int64_t it = lo; it < hi;) {
        const int64_t m = it / Hq, h = it % Hq, kvh = h / group;
        int64_t end = m * Hq + (kvh + 1) * group; /* first item of the next KV head or row */
        if (end > hi) end = hi;
        if (end - it > KM_ATT_GMAX) end = it + KM_ATT_GMAX;
        const int64_t p = pos + m;
        const int64_t j0 = (window > 0 && p - window + 1 > 0) ? p - window + 1 : 0;
        const km_kv_t *kr = kc + kvh * C * D, *vr = vc + kvh * C * D;
        switch (end - it) {
            case 1: attend(1, y + it * D, q + it * D, kr, vr, D, j0, p, scale); break;
            default: attend(2, y + it * D, q + it * D, kr, vr, D, j0, p, scale); break;
        }
        it = end;
    }
}

#endif
