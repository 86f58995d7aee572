/* linear/float_ggml_body.h — the family body of linear.<t>.<t>.ggml.v1 for the float weight types (t = f16,
 * bf16, f32): llama.cpp's x86 ggml_vec_dot_<t> order (its AVX-512 build), written once against the lanes
 * interface (common/km_lanes.h); every ISA variant is an instantiation of it.
 *
 * The activation row is already in the weight's type (quantize_act.f16.v1 / quantize_act.bf16.v1 convert
 * f32 rows as llama.cpp does; f32 rows are used as they are). Numerics (exactly linear/<t>_<t>_ggml_ref.c),
 * per output (m, n) over the K elements, np = K - K % 64:
 *   f16, f32: 64 f32 lanes (four 16-lane accumulators s0..s3, element i -> s[(i % 64) / 16], lane i % 16),
 *     from +0: lane = fma(w, x, lane) for every i < np in order (halves converted exactly). Reduction:
 *     (s0 + s2) + (s1 + s3) lane-wise, then the 16 lanes: h[l] = v[l] + v[l + 8], then kl_f8_fold(h).
 *     f16: the tail i >= np adds f32(w * x) (exact) to that sum in double, y = (float) sum.
 *     f32: the tail as the peer's binary (GCC-vectorized): while 16 or more remain, 16 rounded products
 *     w * x added one by one in f32; then, if 8 or more remain, 8 more the same way; the last < 8 by fma.
 *   bf16: two 16-lane accumulators c1, c2 from +0; per 64 elements c1 takes [i, i + 32), c2 [i + 32, i + 64):
 *     lane j of a 32-element step = kl_f8_dpbf16 (vdpbf16ps: odd element of the pair first, DAZ / FTZ).
 *     sum = (double) 0 + reduce(c1); sum += reduce(c2) (reduce as above, in f32; the adds in double); the tail
 *     i >= np adds f32(w * x) in double; y = (float) sum.
 * Lanes here are kl_f16v vectors for KFL_DOTW 64 (a 16-lane accumulator is one kl_f16v: one zmm on AVX-512, two
 * ymm on AVX2, four q registers on NEON; the reduction kl_f16v_add and kl_f16v_fold) and kl_f8 vectors for
 * KFL_DOTW 32; the double-precision and tail steps are plain C (one IEEE operation each). Each ISA's registers
 * hold the same lanes, so the grouping never changes a bit (the zmm form halves the AVX-512 instruction count:
 * Zen 5, 2 threads, 128-row prefill f16 +35-60%, the avx512 variant's bf16 emulation ~2x; the decode GEMVs gained
 * from reading one row per step instead, KFL_R1 below).
 *
 * Numerics parameter KFL_DOTW (64 when not defined): 32 gives llama.cpp's AVX2 build (GGML_AVX512 off), contracts
 * linear.<t>.<t>.ggml_dot32.v1: np = K - K % 32, four 8-lane accumulators a0..a3 (element i -> a[(i % 32) / 8],
 * lane i % 8) by fma for every type (bf16 too: the product of two bf16 is exact in f32, so fma = its mul + add;
 * no flushing), P = (a0 + a2) + (a1 + a3) lane-wise, then
 *   f16 (the score dot of attention.f16kv.ggml_fa_dot32.v1), f32: T[l] = P[l] + P[l + 4], r = (T0 + T1) + (T2 + T3)
 *     (two horizontal adds); f16 adds its tail in double, f32 its tail as above;
 *   bf16: r = kl_f8_fold(P) (its own reduction: halves, then movehl, then movehdup), sum = (double) r plus the
 *     tail in double.
 *
 * Schedule (the instantiating file defines these before including this header):
 *   KFL_R1  weight rows per decode step (M = 1): independent accumulator sets (1: the thread's rows read in address
 *           order, one stream; 2 or 4 rows per step read 2 or 4 interleaved streams, 20-30% slower from memory on Zen 5)
 *   KFL_TT  activation rows per prefill tile (one weight row against KFL_TT activation rows)
 *   KFL_PF  software prefetch distance in bytes along each weight row (to L2; one-row tiles, as decode's, with the
 *           non-temporal hint kl_prefetch_nt: Zen 5, weights from memory, interleaved A/B (benchmarks/ab_linear.py):
 *           one thread f16 / f32 / bf16 LM-head GEMV +6 / +6 / +15%, the FFN shapes 0-8%; two threads +4-5% at
 *           the LM head, the FFN shapes within noise. The same hint in the q8_0 and K-quant GEMVs gained 2-9% on
 *           one thread but lost 1-6% on two at the FFN shapes, and 7-26% in the q32_r8 ones: not used there)
 * Partition: output columns n (km_part over N); no output depends on M, tiling or (ith, nth).
 * The instantiating file defines the entry point (linear.token_major.v1 ABI) as a call of kfl_linear.
 */
#ifndef KM_FLOAT_GGML_BODY_H
#define KM_FLOAT_GGML_BODY_H

#include "km_lanes.h"

#define KFL_F16 1
#define KFL_BF16 2
#define KFL_F32 4

#ifndef KFL_DOTW
#define KFL_DOTW 64 /* numerics: llama.cpp's AVX-512 build (32: its AVX2 build) */
#endif
#if KFL_DOTW != 64 && KFL_DOTW != 32
#error "float_ggml_body.h: KFL_DOTW must be 64 or 32"
#endif

#define KFL_ESIZE(fmt) ((fmt) == KFL_F32 ? 4 : 2)
#define KFL_NACC 4 /* accumulators per output: s0..s3 (f16, f32); bf16 uses c1, c2 (KFL_DOTW 64) */

#if KFL_DOTW == 64
typedef kl_f16v kfl_v; /* one 16-lane accumulator */
#define KFL_VL 16
#define kfl_zero kl_f16v_zero
#define kfl_fma kl_f16v_fma
#else
typedef kl_f8 kfl_v;
#define KFL_VL 8
#define kfl_zero kl_f8_zero
#define kfl_fma kl_f8_fma
#endif

/* KFL_VL consecutive elements at p of a row of format fmt, as f32 (exact). */
KL_INLINE kfl_v kfl_load(const uint8_t *p, const int fmt) {
#if KFL_DOTW == 64
    if (fmt == KFL_F32) return kl_f16v_loadu((const float *)p);
    if (fmt == KFL_F16) return kl_f16v_load_f16((const uint16_t *)p);
    return kl_f16v_load_bf16((const uint16_t *)p);
#else
    if (fmt == KFL_F32) return kl_f8_loadu((const float *)p);
    if (fmt == KFL_F16) return kl_f8_load_f16((const uint16_t *)p);
    return kl_f8_load_bf16((const uint16_t *)p);
#endif
}

/* Element i of a row as f32 (exact). */
KL_INLINE float kfl_elem(const uint8_t *row, int64_t i, const int fmt) {
    if (fmt == KFL_F32) {
        float f;
        memcpy(&f, row + 4 * i, 4);
        return f;
    }
    uint16_t h;
    memcpy(&h, row + 2 * i, 2);
    if (fmt == KFL_F16) return km_fp16_to_fp32(h);
    const uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* The 64-lane (f16, f32) or 32 + 32-lane (bf16) steps over elements [0, np) of R weight rows x T
 * activation rows: acc[(r * T + t) * KFL_NACC + q]. */
KL_INLINE void kfl_steps(kfl_v *acc, const uint8_t *const *wr, const uint8_t *const *xr, int64_t np, const int fmt,
                         const int R, const int T) {
    const int64_t es = KFL_ESIZE(fmt);
    for (int i = 0; i < R * T * KFL_NACC; i++) acc[i] = kfl_zero();
    for (int64_t i = 0; i < np; i += KFL_DOTW) {
        for (int r = 0; r < R; r++) {
            for (int64_t o = 0; o < KFL_DOTW * es; o += 64) {
                if (T == 1) kl_prefetch_nt(wr[r] + i * es + KFL_PF + o); /* a decode step reads each row once */
                else kl_prefetch_l2(wr[r] + i * es + KFL_PF + o);
            }
        }
#if KFL_DOTW == 64
        if (fmt == KFL_BF16) {
            for (int q = 0; q < 2; q++)
                for (int r = 0; r < R; r++)
                    for (int t = 0; t < T; t++) {
                        kfl_v *a = &acc[(r * T + t) * KFL_NACC + q];
                        *a = kl_f16v_dpbf16(*a, (const uint16_t *)(wr[r] + (i + 32 * q) * 2),
                                            (const uint16_t *)(xr[t] + (i + 32 * q) * 2));
                    }
            continue;
        }
#endif
        for (int q = 0; q < 4; q++) {
            kfl_v wv[KFL_R1 > KFL_TT ? KFL_R1 : KFL_TT];
            for (int r = 0; r < R; r++) wv[r] = kfl_load(wr[r] + (i + KFL_VL * q) * es, fmt);
            for (int t = 0; t < T; t++) {
                const kfl_v xv = kfl_load(xr[t] + (i + KFL_VL * q) * es, fmt);
                for (int r = 0; r < R; r++) {
                    kfl_v *a = &acc[(r * T + t) * KFL_NACC + q];
                    *a = kfl_fma(wv[r], xv, *a);
                }
            }
        }
    }
}

/* One output from its accumulators (a[0..3]) and the tail [np, K) of its rows w, x. */
KL_INLINE float kfl_finish(const kfl_v *a, const uint8_t *w, const uint8_t *x, int64_t np, int64_t K, const int fmt) {
#if KFL_DOTW == 32
    if (fmt == KFL_BF16) {
        double s = (double)kl_f8_fold(kl_f8_add(kl_f8_add(a[0], a[2]), kl_f8_add(a[1], a[3])));
        for (int64_t i = np; i < K; i++) s += (double)(kfl_elem(w, i, fmt) * kfl_elem(x, i, fmt));
        return (float)s;
    }
    float p[8];
    kl_f8_storeu(p, kl_f8_add(kl_f8_add(a[0], a[2]), kl_f8_add(a[1], a[3])));
    const float t0 = p[0] + p[4], t1 = p[1] + p[5], t2 = p[2] + p[6], t3 = p[3] + p[7];
    const float r = (t0 + t1) + (t2 + t3);
#else
    if (fmt == KFL_BF16) {
        double s = 0.0;
        s += (double)kl_f16v_fold(a[0]);
        s += (double)kl_f16v_fold(a[1]);
        for (int64_t i = np; i < K; i++) s += (double)(kfl_elem(w, i, fmt) * kfl_elem(x, i, fmt));
        return (float)s;
    }
    const float r = kl_f16v_fold(kl_f16v_add(kl_f16v_add(a[0], a[2]), kl_f16v_add(a[1], a[3])));
#endif
    if (fmt == KFL_F16) {
        double s = (double)r;
        for (int64_t i = np; i < K; i++) s += (double)(kfl_elem(w, i, fmt) * kfl_elem(x, i, fmt));
        return (float)s;
    }
    float s = r;
    int64_t i = np;
    for (; K - i >= 16; i += 16)
        for (int j = 0; j < 16; j++) s = s + kfl_elem(w, i + j, fmt) * kfl_elem(x, i + j, fmt);
    if (K - i >= 8) {
        for (int j = 0; j < 8; j++) s = s + kfl_elem(w, i + j, fmt) * kfl_elem(x, i + j, fmt);
        i += 8;
    }
    for (; i < K; i++) s = __builtin_fmaf(kfl_elem(w, i, fmt), kfl_elem(x, i, fmt), s);
    return s;
}

/* R weight rows from column n x T activation rows from row m. */
KL_INLINE void kfl_tile(float *y, int64_t N, const uint8_t *w, const uint8_t *x, int64_t rowb, int64_t n, int64_t m,
                        int64_t K, const int fmt, const int R, const int T) {
    const int64_t np = K - K % KFL_DOTW;
    const uint8_t *wr[KFL_R1 > 1 ? KFL_R1 : 1], *xr[KFL_TT];
    for (int r = 0; r < R; r++) wr[r] = w + (n + r) * rowb;
    for (int t = 0; t < T; t++) xr[t] = x + (m + t) * rowb;
    kfl_v acc[(KFL_R1 > KFL_TT ? KFL_R1 : KFL_TT) * KFL_NACC];
    kfl_steps(acc, wr, xr, np, fmt, R, T);
    for (int r = 0; r < R; r++)
        for (int t = 0; t < T; t++)
            y[(m + t) * N + n + r] = kfl_finish(&acc[(r * T + t) * KFL_NACC], wr[r], xr[t], np, K, fmt);
}

/* The whole linear.token_major.v1 call: thread ith's columns; decode (M = 1) KFL_R1 rows per step,
 * prefill one weight row against tiles of KFL_TT activation rows (then 2, 1). */
static inline void kfl_linear(float *y, const void *w, const void *x, int64_t M, int64_t N, int64_t K, int ith, int nth,
                              const int fmt) {
    int64_t lo, hi;
    km_part(N, ith, nth, &lo, &hi);
    const int64_t rowb = K * KFL_ESIZE(fmt);
    const uint8_t *wb = (const uint8_t *)w, *xb = (const uint8_t *)x;
    if (M == 1) {
        int64_t n = lo;
        for (; n + KFL_R1 <= hi; n += KFL_R1) kfl_tile(y, N, wb, xb, rowb, n, 0, K, fmt, KFL_R1, 1);
        for (; n < hi; n++) kfl_tile(y, N, wb, xb, rowb, n, 0, K, fmt, 1, 1);
        return;
    }
    for (int64_t n = lo; n < hi; n++) {
        int64_t m = 0;
        for (; m + KFL_TT <= M; m += KFL_TT) kfl_tile(y, N, wb, xb, rowb, n, m, K, fmt, 1, KFL_TT);
        for (; m + 2 <= M; m += 2) kfl_tile(y, N, wb, xb, rowb, n, m, K, fmt, 1, 2);
        for (; m < M; m++) kfl_tile(y, N, wb, xb, rowb, n, m, K, fmt, 1, 1);
    }
}

#endif /* KM_FLOAT_GGML_BODY_H */
