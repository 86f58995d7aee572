/* km_rope.h — the rotary-embedding arithmetic of rope.neox.f32.v1 and rope.normal.f32.v1, written once
 * against the lanes interface (km_lanes.h), and shared by the family bodies that state it:
 * rope/rope_body.h and fused/qk_norm_rope_body.h.
 *
 * Numerics (exactly rope/neox_f32_ref.c and rope/normal_f32_ref.c, ggml rope with ext_factor 0,
 * attn_factor 1, no freq factors): theta_scale = powf(freq_base, -2.0f / D); for the row at position p,
 * theta starts at (float)p and is multiplied by theta_scale (f32) after each pair; pair i uses
 * t = freq_scale * theta, c = cosf(t), s = sinf(t) (libm, scalar); the pair (x0, x1) becomes
 * y0 = fma(x0, c, -(x1 * s)), y1 = fma(x0, s, x1 * c) — the product rounded first, then one fused
 * multiply-add. NeoX pairs element i with i + D/2; normal pairs 2i with 2i + 1 (there the tables are laid
 * out interleaved, (c, s) and (-s, c) per pair, so one lane computes fma(x_even, c|s, x_odd * -s|c):
 * x1 * -s is -(x1 * s) exactly). D even, D <= KRP_DMAX.
 */
#ifndef KM_ROPE_H
#define KM_ROPE_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "km_eltwise.h"
#include "km_lanes.h"

#define KRP_DMAX 512

/* One row's rotation tables: neox: a = cos, b = sin, [D/2] each; normal: a = (c, s), b = (-s, c), [D]. */
typedef struct {
    float a[KRP_DMAX], b[KRP_DMAX];
} krp_tables;

KL_INLINE float krp_theta_scale(float freq_base, int64_t D) { return powf(freq_base, -2.0f / (float)D); }

/* The tables of the row at position pos_f (the ref's scalar loop); interleaved for the normal style. With
 * frequency factors f[half] (rope_ff.*.f32.v1, rope/rope_ff_ref.h; NULL: none) pair i's angle is
 * freq_scale * (theta / f[i]) (f32 divide, then multiply) instead of freq_scale * theta. */
KL_INLINE void krp_cache_ff(krp_tables *t, float pos_f, const float *f, float freq_scale, float theta_scale,
                            int64_t half, const int normal) {
    float theta = pos_f;
    for (int64_t i = 0; i < half; i++) {
        const float a = freq_scale * (f ? theta / f[i] : theta);
        const float c = cosf(a), s = sinf(a);
        if (normal) {
            t->a[2 * i] = c;
            t->a[2 * i + 1] = s;
            t->b[2 * i] = -s;
            t->b[2 * i + 1] = c;
        } else {
            t->a[i] = c;
            t->b[i] = s;
        }
        theta *= theta_scale;
    }
}

KL_INLINE void krp_cache(krp_tables *t, float pos_f, float freq_scale, float theta_scale, int64_t half,
                         const int normal) {
    krp_cache_ff(t, pos_f, NULL, freq_scale, theta_scale, half, normal);
}

/* ---- the table memo ----
 * A row's tables are a pure function of (position, theta_scale, freq_scale, half, style), all in the key, and one
 * forward pass asks for the same ones again and again: every rope op of every layer (Gemma 3: q and k of 18 layers,
 * two bases) at the same positions. Computing them (2 libm calls per pair) was most of the rope ops' time, so each
 * thread keeps the tables it made in a memo: 2-way set-associative, the set chosen by the position, each way holding
 * its full key, so a lookup either returns the bytes krp_cache would write for that key or misses and computes them.
 * The memo can never change a bit, only skip work; tables with frequency factors (rope_ff: the factors are weights,
 * not part of the key) and those wider than KRP_MEMO_F floats always compute. 512 KiB of thread-local storage per
 * thread that runs a rope op. Gemma 3 270M, 2 threads, in-process A/B of two builds: the q and k rope ops of a
 * 256-token prefill 3.8 -> 1.9 ms (the q op still normalises and rotates 4 heads per row), a decode step 43 -> 27
 * us. */
#define KRP_MEMO_SETS 128 /* positions p and p + 128 share a set */
#define KRP_MEMO_F 256    /* floats per table: neox D <= 512, normal D <= 256 */

typedef struct {
    uint32_t pos, ts, fs; /* float bits of the key */
    int32_t n;            /* floats per table (neox: half; normal: -2 * half, so the style is in the key), 0: empty */
    float a[KRP_MEMO_F], b[KRP_MEMO_F];
} krp_memo_way;

typedef struct {
    krp_memo_way way[KRP_MEMO_SETS][2];
    uint8_t last[KRP_MEMO_SETS]; /* the way most recently filled or hit */
} krp_memo_t;

static __thread krp_memo_t krp_memo;

KL_INLINE uint32_t krp_bits(float v) {
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    return u;
}

/* krp_cache's tables of row pos_f, from the thread's memo when it holds them. */
KL_INLINE void krp_cache_memo(krp_tables *t, float pos_f, float freq_scale, float theta_scale, int64_t half,
                              const int normal) {
    const int64_t n = normal ? 2 * half : half;
    if (n > KRP_MEMO_F || n < 1) {
        krp_cache(t, pos_f, freq_scale, theta_scale, half, normal);
        return;
    }
    const uint32_t kp = krp_bits(pos_f), kt = krp_bits(theta_scale), kf = krp_bits(freq_scale);
    const int32_t kn = (int32_t)(normal ? -n : n); /* one translation unit may hold both styles' callers */
    const uint32_t set = (uint32_t)pos_f % KRP_MEMO_SETS; /* any set is correct: the ways hold their keys */
    for (int w = 0; w < 2; w++) {
        const krp_memo_way *e = &krp_memo.way[set][w];
        if (e->n == kn && e->pos == kp && e->ts == kt && e->fs == kf) {
            memcpy(t->a, e->a, (size_t)n * sizeof(float));
            memcpy(t->b, e->b, (size_t)n * sizeof(float));
            krp_memo.last[set] = (uint8_t)w;
            return;
        }
    }
    krp_cache(t, pos_f, freq_scale, theta_scale, half, normal);
    const int w = 1 - krp_memo.last[set];
    krp_memo_way *e = &krp_memo.way[set][w];
    e->pos = kp;
    e->ts = kt;
    e->fs = kf;
    e->n = kn;
    memcpy(e->a, t->a, (size_t)n * sizeof(float));
    memcpy(e->b, t->b, (size_t)n * sizeof(float));
    krp_memo.last[set] = (uint8_t)w;
}

/* NeoX: n (<= KL_FV_LANES) pairs (i + l, i + l + half) of one head; y may alias x. */
KL_INLINE void krp_neox_at(float *y, const float *x, int64_t half, const krp_tables *t, int64_t i, const int n) {
    const kl_fv x0 = kel_load(x + i, n), x1 = kel_load(x + i + half, n);
    const kl_fv c = kel_load(t->a + i, n), s = kel_load(t->b + i, n);
    kel_store(y + i, kl_fv_fms(x0, c, kl_fv_mul(x1, s)), n);
    kel_store(y + i + half, kl_fv_fma(x0, s, kl_fv_mul(x1, c)), n);
}

/* Normal: the n (<= KL_FV_LANES, even) values from i of one head; y may alias x. */
KL_INLINE void krp_normal_at(float *y, const float *x, const krp_tables *t, int64_t i, const int n) {
    const kl_fv v = kel_load(x + i, n);
    const kl_fv odd = kl_fv_mul(kl_fv_dup_odd(v), kel_load(t->b + i, n));
    kel_store(y + i, kl_fv_fma(kl_fv_dup_even(v), kel_load(t->a + i, n), odd), n);
}

/* One head of D values (pairs per the style); y may alias x. */
KL_INLINE void krp_rotate(float *y, const float *x, int64_t D, const krp_tables *t, const int normal) {
    const int64_t len = normal ? D : D / 2;
    int64_t i = 0;
    for (; i + KL_FV_LANES <= len; i += KL_FV_LANES) {
        if (normal) krp_normal_at(y, x, t, i, KL_FV_LANES);
        else krp_neox_at(y, x, D / 2, t, i, KL_FV_LANES);
    }
    if (i < len) {
        if (normal) krp_normal_at(y, x, t, i, (int)(len - i));
        else krp_neox_at(y, x, D / 2, t, i, (int)(len - i));
    }
}

#endif /* KM_ROPE_H */
