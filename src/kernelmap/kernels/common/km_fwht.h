/* km_fwht.h — llama.cpp's Hadamard rotation of a quantized KV cache (ggml-cpu fwht), written once against the lanes
 * interface (km_lanes.h) for the family bodies of the q8_0 KV cache (kv_append/kv_append_q8_body.h,
 * attention/ggmlfa_q8kv_body.h).
 *
 * Numerics: exactly km_fwht_ref (common/km_q8_0_ref.h): y[j] = x[j] * (1.0f / sqrtf(n)), then for len = 1, 2, ..,
 * n/2 every pair (u, v) = (y[i + j], y[i + len + j]) of a 2*len block becomes (u + v, u - v). Each value is one
 * f32 operation of the same operands in the same order of passes whether it runs on lanes (len a multiple of
 * KL_FV_LANES) or as scalar steps (len < KL_FV_LANES), so every ISA gives the ref's bits. n a power of two, a
 * multiple of KL_FV_LANES.
 */
#ifndef KM_FWHT_H
#define KM_FWHT_H

#include <math.h>

#include "km_lanes.h"

KL_INLINE void kfw_fwht(float *y, const float *x, int64_t n) {
    const kl_fv s = kl_fv_set1(1.0f / sqrtf((float)n));
    for (int64_t j = 0; j < n; j += KL_FV_LANES) kl_fv_storeu(y + j, kl_fv_mul(kl_fv_loadu(x + j), s));
    int64_t len = 1;
    for (; len < n && len < KL_FV_LANES; len <<= 1) {
        for (int64_t i = 0; i < n; i += 2 * len) {
            for (int64_t j = i; j < i + len; j++) {
                const float u = y[j], v = y[j + len];
                y[j] = kl_f32_add(u, v);
                y[j + len] = kl_f32_sub(u, v);
            }
        }
    }
    for (; len < n; len <<= 1) {
        for (int64_t i = 0; i < n; i += 2 * len) {
            for (int64_t j = i; j < i + len; j += KL_FV_LANES) {
                const kl_fv u = kl_fv_loadu(y + j), v = kl_fv_loadu(y + j + len);
                kl_fv_storeu(y + j, kl_fv_add(u, v));
                kl_fv_storeu(y + j + len, kl_fv_sub(u, v));
            }
        }
    }
}

/* llama.cpp's rotation block of K and Q for head size D (a multiple of 64): the largest power of two dividing D */
KL_INLINE int64_t kfw_rot_k(int64_t D) {
    int64_t n = 64;
    while (D % (2 * n) == 0) n *= 2;
    return n;
}

#define KFW_ROT_V 64

#endif /* KM_FWHT_H */
