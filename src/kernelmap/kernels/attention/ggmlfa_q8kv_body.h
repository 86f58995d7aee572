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
 *
 * Schedule (the same roundings per element, reordered only across independent chains): a thread walks its items
 * in groups of up to KFQ_G query heads of one row that read one KV head (Gemma 3: the 4 heads of a row), so they
 * see the same keys. Keys go in blocks of KFQ_KB: (1) per item, the block's scores as KFQ_KB interleaved chains;
 * (2) per item, the online-softmax scalars of the block (attention/ggmlfa_softmax.h: the running maximum as a
 * prefix scan, expf by kl_fv_expf over the block when it equals libm's expf on a sample, else expf); (3) VKQ in
 * column chunks of KFQ_CV vectors per item held in registers across the block's keys, each V vector widened and
 * scaled once for all items of the group. On the Xeon (AVX-512 VNNI, Hq 4 / Hkv 1, D 256, 1 thread; interleaved
 * A/B, minimum of 7-21 runs) this made a 64-row prefill over 1024 keys 1.6-2.5x and one decode row over 2048 keys
 * 1.6-2.2x faster than the one-item loop it replaced (AVX2: 1.6x). The rows KFQ_PFD blocks ahead are prefetched
 * when the call has one row (a decode step: Gemma 3 270M, 2 threads, in-process A/B, attention 0.48 -> 0.41 and
 * 0.39 -> 0.32 ms per step; in a 256-row prefill the same hints made it 6-8% slower: its rows re-read cached keys),
 * a slice of each row per key step of the VKQ pass (kfq_pf: a block's rows in one burst filled the miss buffers and
 * stalled the core, as in ggmlfa_body.h).
 */
#ifndef KM_GGMLFA_Q8KV_BODY_H
#define KM_GGMLFA_Q8KV_BODY_H

#include <math.h>

#include "km_actquant.h"
#include "km_fwht.h"
#include "attention_ggmlfa_part.h"
#include "ggmlfa_softmax.h"

#define KFQ_DMAX 512
#define KFQ_NB (KFQ_DMAX / KM_QK8_0)
#define KFQ_G 4   /* items per group: query heads of one row reading one KV head */
#define KFQ_KB 16 /* keys per block */
#define KFQ_CV 4  /* VKQ column chunk: native vectors per item held in registers */
#define KFQ_PFD 2 /* blocks ahead the K and V rows are prefetched */
#define KFQ_AI static inline __attribute__((always_inline))

/* One item's query, prepared: its q8_0 blocks in the dot form and their scales. */
typedef struct {
    kl_q32xb xb[KFQ_NB];
    float dq[KFQ_NB];
} kfq_q;

KFQ_AI void kfq_prep(kfq_q *r, const float *qr, int64_t D, float scale, const int per_score, const int rot, int64_t nk) {
    float qs[KFQ_DMAX] __attribute__((aligned(64)));
    float tmp[KFQ_DMAX] __attribute__((aligned(64)));
    const kl_fv vscale = kl_fv_set1(scale);
    for (int64_t d = 0; d < D; d += KL_FV_LANES) {
        const kl_fv v = kl_fv_loadu(qr + d);
        kl_fv_storeu(qs + d, per_score ? v : kl_fv_mul(v, vscale));
    }
    if (rot) {
        for (int64_t b = 0; b < D; b += nk) kfw_fwht(tmp + b, qs + b, nk);
        for (int64_t d = 0; d < D; d += KL_FV_LANES) kl_fv_storeu(qs + d, kl_fv_loadu(tmp + d));
    }
    for (int64_t b = 0; b < D / KM_QK8_0; b++) {
        km_block_q8_0 qq;
        kqa_q8_0_rne_at(&qq, qs + b * KM_QK8_0);
        kl_q32xb_prep(&r->xb[b], qq.qs, KL_Q32_Q8_0);
        r->dq[b] = kl_h2f(qq.d);
    }
}

/* Item q's scores of keys kr[0 .. KB): KB independent chains in ggml_vec_dot_q8_0_q8_0's order, interleaved. */
KFQ_AI void kfq_scores(float *sc, const km_block_q8_0 *const *kr, const kfq_q *q, int64_t nb, float scale,
                       const int per_score) {
    kl_f8 sa[KFQ_KB];
    for (int k = 0; k < KFQ_KB; k++) sa[k] = kl_f8_zero();
    for (int64_t b = 0; b < nb; b++) {
        for (int k = 0; k < KFQ_KB; k++) {
            const kl_f8 dot = kl_q32_dot(kl_q32w_load((const uint8_t *)(kr[k] + b), KL_Q32_Q8_0), &q->xb[b], KL_Q32_Q8_0);
            sa[k] = kl_f8_fma(kl_f8_set1(kl_f32_mul(kl_h2f(kr[k][b].d), q->dq[b])), dot, sa[k]);
        }
    }
    for (int k = 0; k < KFQ_KB; k++) {
        const float v = kl_f8_fold(sa[k]);
        sc[k] = per_score ? kl_f32_mul(v, scale) : v;
    }
}

/* Memory hint only: the K and V rows of up to KFQ_KB keys a later block reads, each step of a VKQ pass prefetching
 * the bytes lo .. hi of one key's rows (a chunk's slice), so the lines go out spread over the pass, not in a burst. */
typedef struct {
    const char *k[KFQ_KB], *v[KFQ_KB];
    int n;           /* keys */
    int64_t bytes;   /* bytes per row */
} kfq_pf;

KFQ_AI void kfq_pf_slice(const kfq_pf *pf, int k, int64_t lo, int64_t hi) {
    if (!pf || k >= pf->n) return;
    for (int64_t o = lo; o < hi; o += 64) {
        kl_prefetch_l2(pf->k[k] + o);
        kl_prefetch_l2(pf->v[k] + o);
    }
    if (hi == pf->bytes) { /* the row's last line, which a slice start 64 bytes apart may miss */
        kl_prefetch_l2(pf->k[k] + hi - 1);
        kl_prefetch_l2(pf->v[k] + hi - 1);
    }
}

/* VKQ columns [c0, c0 + NVC vectors) of G items over keys 0 .. nk of the block: each V vector is widened and
 * scaled once ((float)q * f32(d), exact) for all items; per item and key in order, VKQ *= ms where the key raised
 * the item's maximum (bit g of nm[k]), then VKQ = fma(V, vs, VKQ); with pf, kfq_pf_slice(pf, k, pf_lo, pf_hi) after
 * key k's step. */
KFQ_AI void kfq_vchunk(float *const *vkq, const km_block_q8_0 *const *vr, const float (*ms)[KFQ_KB],
                       const float (*vs)[KFQ_KB], const uint8_t *nm, int nk, int64_t c0, const int G, const int NVC,
                       const kfq_pf *pf, int64_t pf_lo, int64_t pf_hi) {
    kl_fv acc[KFQ_G][KFQ_CV];
    for (int g = 0; g < G; g++)
        for (int v = 0; v < NVC; v++) acc[g][v] = kl_fv_loadu(vkq[g] + c0 + v * KL_FV_LANES);
    for (int k = 0; k < nk; k++) {
        kl_fv x[KFQ_CV];
        for (int v = 0; v < NVC; v++) {
            const int64_t d = c0 + v * KL_FV_LANES;
            const km_block_q8_0 *blk = vr[k] + d / KM_QK8_0;
            x[v] = kl_fv_mul(kl_fv_cvt_i8(blk->qs + d % KM_QK8_0), kl_fv_set1(kl_h2f(blk->d)));
        }
        if (__builtin_expect(nm[k] != 0, 0)) {
            for (int g = 0; g < G; g++) {
                if (nm[k] >> g & 1u) {
                    const kl_fv m = kl_fv_set1(ms[g][k]);
                    for (int v = 0; v < NVC; v++) acc[g][v] = kl_fv_mul(acc[g][v], m);
                }
            }
        }
        for (int g = 0; g < G; g++) {
            const kl_fv s = kl_fv_set1(vs[g][k]);
            for (int v = 0; v < NVC; v++) acc[g][v] = kl_fv_fma(x[v], s, acc[g][v]);
        }
        kfq_pf_slice(pf, k, pf_lo, pf_hi);
    }
    for (int g = 0; g < G; g++)
        for (int v = 0; v < NVC; v++) kl_fv_storeu(vkq[g] + c0 + v * KL_FV_LANES, acc[g][v]);
}

KFQ_AI void kfq_vblock(float *const *vkq, const km_block_q8_0 *const *vr, const float (*ms)[KFQ_KB],
                       const float (*vs)[KFQ_KB], const uint8_t *nm, int nk, int64_t D, const int G,
                       const kfq_pf *pf) {
    const int64_t step = KFQ_CV * KL_FV_LANES, nch = D / step;
    int64_t c0 = 0;
    for (int64_t c = 0; c < nch; c++, c0 += step) {
        /* the slices tile each prefetched row: chunk c takes bytes c*bytes/nch .. (c+1)*bytes/nch */
        const int64_t lo = pf ? c * pf->bytes / nch : 0, hi = pf ? (c + 1) * pf->bytes / nch : 0;
        kfq_vchunk(vkq, vr, ms, vs, nm, nk, c0, G, KFQ_CV, nch > 0 ? pf : NULL, lo, hi);
    }
    for (; c0 < D; c0 += KL_FV_LANES) kfq_vchunk(vkq, vr, ms, vs, nm, nk, c0, G, 1, NULL, 0, 0);
    if (pf && nch == 0) { /* no whole chunk (D < one chunk): the rows at once */
        for (int k = 0; k < pf->n; k++) kfq_pf_slice(pf, k, 0, pf->bytes);
    }
}

/* Memory hint only: the K and V rows of keys a .. b (none when a > b; key j in cell j mod C) towards L2. */
KFQ_AI void kfq_prefetch(const km_block_q8_0 *kc, const km_block_q8_0 *vc, int64_t kvh, int64_t C, int64_t nb,
                         int64_t a, int64_t b) {
    const int64_t bytes = nb * (int64_t)sizeof(km_block_q8_0);
    for (int64_t j = a; j <= b; j++) {
        const char *kr = (const char *)(kc + (kvh * C + j % C) * nb), *vr = (const char *)(vc + (kvh * C + j % C) * nb);
        for (int64_t o = 0; o < bytes; o += 64) {
            kl_prefetch_l2(kr + o);
            kl_prefetch_l2(vr + o);
        }
    }
}

/* A group of G items (heads h0 .. h0 + G - 1 of row m, one KV head kvh): every item sees keys j0 .. p. */
KFQ_AI void kfq_group(float *y, const float *q, const km_block_q8_0 *kc, const km_block_q8_0 *vc, int64_t it0,
                      int64_t kvh, int64_t D, int64_t C, int64_t j0, int64_t p, float scale, const int per_score,
                      const int rot, int use_vexp, int pf, const int G) {
    const int64_t nb = D / KM_QK8_0, nk_rot = rot ? kfw_rot_k(D) : 0;
    kfq_q qp[KFQ_G];
    float vkq_buf[KFQ_G][KFQ_DMAX] __attribute__((aligned(64)));
    float *vkq[KFQ_G];
    float big_m[KFQ_G], big_s[KFQ_G];
    for (int g = 0; g < G; g++) {
        kfq_prep(&qp[g], q + (it0 + g) * D, D, scale, per_score, rot, nk_rot);
        vkq[g] = vkq_buf[g];
        for (int64_t d = 0; d < D; d += KL_FV_LANES) kl_fv_storeu(vkq[g] + d, kl_fv_zero());
        big_m[g] = -INFINITY;
        big_s[g] = 0.0f;
    }
    /* memory hint (pf: one row, a decode step, whose cache comes from DRAM; a prefill batch's rows re-read the
     * same keys from cache, and there the hints cost 8% of attention): rows KFQ_PFD blocks ahead */
    if (pf) kfq_prefetch(kc, vc, kvh, C, nb, j0, j0 + KFQ_PFD * KFQ_KB - 1 < p ? j0 + KFQ_PFD * KFQ_KB - 1 : p);
    for (int64_t jc = j0; jc <= p; jc += KFQ_KB) {
        const int nk = p - jc + 1 < KFQ_KB ? (int)(p - jc + 1) : KFQ_KB;
        kfq_pf rows; /* the rows KFQ_PFD blocks ahead, prefetched during this block's VKQ pass */
        if (pf) {
            const int64_t pa = jc + KFQ_PFD * KFQ_KB;
            rows.n = pa > p ? 0 : (int)(p - pa + 1 < KFQ_KB ? p - pa + 1 : KFQ_KB);
            rows.bytes = nb * (int64_t)sizeof(km_block_q8_0);
            for (int k = 0; k < rows.n; k++) {
                rows.k[k] = (const char *)(kc + (kvh * C + (pa + k) % C) * nb);
                rows.v[k] = (const char *)(vc + (kvh * C + (pa + k) % C) * nb);
            }
        }
        const km_block_q8_0 *kr[KFQ_KB], *vr[KFQ_KB];
        for (int k = 0; k < KFQ_KB; k++) {
            const int64_t j = jc + (k < nk ? k : nk - 1); /* past the block's end: the last key again (unused) */
            kr[k] = kc + (kvh * C + j % C) * nb;
            vr[k] = vc + (kvh * C + j % C) * nb;
        }
        float sc[KFQ_G][KFQ_KB + 16], ms[KFQ_G][KFQ_KB], vs[KFQ_G][KFQ_KB];
        uint8_t nm[KFQ_KB + 16];
        memset(nm, 0, sizeof nm);
        for (int g = 0; g < G; g++) {
            kfq_scores(sc[g], kr, &qp[g], nb, scale, per_score);
            kfa_softmax(sc[g], ms[g], vs[g], nm, g, nk, &big_m[g], &big_s[g], use_vexp);
        }
        kfq_vblock(vkq, vr, (const float (*)[KFQ_KB])ms, (const float (*)[KFQ_KB])vs, nm, nk, D, G,
                   pf ? &rows : NULL);
    }
    for (int g = 0; g < G; g++) {
        const kl_fv inv = kl_fv_set1(big_s[g] == 0.0f ? 0.0f : 1.0f / big_s[g]);
        float *yr = y + (it0 + g) * D;
        if (rot) {
            for (int64_t d = 0; d < D; d += KL_FV_LANES) kl_fv_storeu(vkq[g] + d, kl_fv_mul(kl_fv_loadu(vkq[g] + d), inv));
            for (int64_t b = 0; b < D; b += KFW_ROT_V) kfw_fwht(yr + b, vkq[g] + b, KFW_ROT_V);
        } else {
            for (int64_t d = 0; d < D; d += KL_FV_LANES) kl_fv_storeu(yr + d, kl_fv_mul(kl_fv_loadu(vkq[g] + d), inv));
        }
    }
}

KL_INLINE void kfq_attention(float *y, const float *q, const void *k_cache, const void *v_cache, int64_t M,
                             int64_t Hq, int64_t Hkv, int64_t D, int64_t C, int64_t pos, float scale, int64_t window,
                             const int per_score, const int rot, int ith, int nth) {
    const km_block_q8_0 *kc = (const km_block_q8_0 *)k_cache; /* [Hkv][C][D/32] */
    const km_block_q8_0 *vc = (const km_block_q8_0 *)v_cache; /* [Hkv][C][D/32] */
    const int64_t group = Hq / Hkv;
    const int use_vexp = kfa_vexp_usable();
    int64_t lo, hi;
    km_fa_part(M, Hq, pos, window, ith, nth, &lo, &hi);
    for (int64_t it = lo; it < hi;) {
        const int64_t m = it / Hq, h = it % Hq, kvh = h / group, p = pos + m;
        const int64_t j0 = (window > 0 && p - window + 1 > 0) ? p - window + 1 : 0;
        int64_t g = (kvh + 1) * group - h; /* the row's remaining heads of this KV head, within the range */
        if (g > hi - it) g = hi - it;
        if (g > KFQ_G) g = KFQ_G;
        switch (g) {
        case 4: kfq_group(y, q, kc, vc, it, kvh, D, C, j0, p, scale, per_score, rot, use_vexp, M == 1, 4); break;
        case 3: kfq_group(y, q, kc, vc, it, kvh, D, C, j0, p, scale, per_score, rot, use_vexp, M == 1, 3); break;
        case 2: kfq_group(y, q, kc, vc, it, kvh, D, C, j0, p, scale, per_score, rot, use_vexp, M == 1, 2); break;
        default: kfq_group(y, q, kc, vc, it, kvh, D, C, j0, p, scale, per_score, rot, use_vexp, M == 1, 1); break;
        }
        it += g;
    }
}

#endif /* KM_GGMLFA_Q8KV_BODY_H */
