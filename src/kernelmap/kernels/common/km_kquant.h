/* km_kquant.h — block layouts and helpers shared by the k-quant kernels (q2_k..q6_k weights x q8_k activations).
 *
 * Contract: inline helpers only. km_q4k_scales() unpacks the 12-byte 6-bit scale/min
 * table of a q4_k block into 8 scales and 8 mins (values 0..63). km_kq_reduce8() is the fixed
 * pairwise tree every k-quant linear variant uses to fold its 8 per-block partial sums:
 *     ((p0 + p4) + (p2 + p6)) + ((p1 + p5) + (p3 + p7))
 * (the order a 256-bit lane fold produces: halves, then pairs, then the last two lanes).
 * Plain float adds, no FMA; the caller is compiled with -ffp-contract=off.
 * The kernelmap-order family body (linear/kq_body.h) keeps the 8 partials as the 8 lanes of one kl_f8
 * (block b in lane b % 8), so its per-lane f32 operations and final tree (kl_f8_fold) are exactly the
 * ref's. This header is ISA-free, since the K-quant family bodies include it.
 */
#ifndef KM_KQUANT_H
#define KM_KQUANT_H

#include "km_common.h"

/* q4_k: sub-block j (values 32j..32j+31) has scale sc[j] and min mn[j], both in 0..63.
 * Bytes q[0..3]: low 6 bits = sc[0..3], top 2 bits = bits 4..5 of sc[4..7];
 * q[4..7]: low 6 bits = mn[0..3], top 2 bits = bits 4..5 of mn[4..7];
 * q[8..11]: low nibble = bits 0..3 of sc[4..7], high nibble = bits 0..3 of mn[4..7].
 * Done four bytes at a time in 32-bit words (GGUF data is little-endian; so are our targets):
 * km_q4k_scales64() returns them packed, byte j of *sc = sc[j], byte j of *mn = mn[j]. */
static inline void km_q4k_scales64(const uint8_t q[KM_K_SCALE_SIZE], uint64_t *sc, uint64_t *mn) {
    uint32_t w0, w1, w2;
    memcpy(&w0, q, 4);
    memcpy(&w1, q + 4, 4);
    memcpy(&w2, q + 8, 4);
    const uint32_t s_lo = w0 & 0x3F3F3F3Fu;
    const uint32_t m_lo = w1 & 0x3F3F3F3Fu;
    const uint32_t s_hi = (w2 & 0x0F0F0F0Fu) | (((w0 >> 6) & 0x03030303u) << 4);
    const uint32_t m_hi = ((w2 >> 4) & 0x0F0F0F0Fu) | (((w1 >> 6) & 0x03030303u) << 4);
    *sc = (uint64_t)s_lo | ((uint64_t)s_hi << 32); /* byte j = sc[j] */
    *mn = (uint64_t)m_lo | ((uint64_t)m_hi << 32);
}

/* The same as byte arrays (the ref's form). SIMD code keeps the 64-bit words in registers
 * (_mm_cvtsi64_si128) instead: reloading 8 bytes just written as two 4-byte stores stalls. */
static inline void km_q4k_scales(const uint8_t q[KM_K_SCALE_SIZE], uint8_t sc[8], uint8_t mn[8]) {
    uint64_t s, m;
    km_q4k_scales64(q, &s, &m);
    memcpy(sc, &s, 8);
    memcpy(mn, &m, 8);
}

/* q2_k: 256 values, 2-bit codes; 16 sub-blocks of 16 with a 4-bit scale (low nibble) and a 4-bit min
 * (high nibble) each; f16 super-scale d and super-min dmin. Value 128h + 32k + i (h < 2, k < 4, i < 32)
 * is bits 2k..2k+1 of qs[32h + i]. 84 bytes. */
typedef struct {
    uint8_t scales[KM_QK_K / 16];
    uint8_t qs[KM_QK_K / 4];
    km_half d;
    km_half dmin;
} km_block_q2_k;

/* q3_k: 256 values, 3-bit signed codes in -4..3: low 2 bits as q2_k's (in qs), the third bit in hmask
 * (value 128h + 32k + i: bit 4h + k of hmask[i]; a clear bit subtracts 4); 16 signed 6-bit scales
 * (stored + 32) packed in 12 bytes; f16 d. 110 bytes. */
typedef struct {
    uint8_t hmask[KM_QK_K / 8];
    uint8_t qs[KM_QK_K / 4];
    uint8_t scales[12];
    km_half d;
} km_block_q3_k;

_Static_assert(sizeof(km_block_q2_k) == 84, "q2_k block size");
_Static_assert(sizeof(km_block_q3_k) == 110, "q3_k block size");

/* q3_k's 16 stored scales (0..63; the signed scale is the stored value - 32), packed one per byte:
 * byte j of *lo is scale j (j < 8), byte j - 8 of *hi scale j (j >= 8). Scale j's low 4 bits are the
 * (j < 8 ? low : high) nibble of byte j % 8, its top 2 bits are bits 2 * (j / 4) .. 2 * (j / 4) + 1 of
 * byte 8 + j % 4. Done four scales at a time in 32-bit words (little-endian data and targets). */
static inline void km_q3k_scales64(const uint8_t q[12], uint64_t *lo, uint64_t *hi) {
    uint32_t w0, w1, w2;
    memcpy(&w0, q, 4);
    memcpy(&w1, q + 4, 4);
    memcpy(&w2, q + 8, 4);
    const uint32_t s0 = (w0 & 0x0F0F0F0Fu) | ((w2 & 0x03030303u) << 4);
    const uint32_t s1 = (w1 & 0x0F0F0F0Fu) | (((w2 >> 2) & 0x03030303u) << 4);
    const uint32_t s2 = ((w0 >> 4) & 0x0F0F0F0Fu) | (((w2 >> 4) & 0x03030303u) << 4);
    const uint32_t s3 = ((w1 >> 4) & 0x0F0F0F0Fu) | (((w2 >> 6) & 0x03030303u) << 4);
    *lo = (uint64_t)s0 | ((uint64_t)s1 << 32);
    *hi = (uint64_t)s2 | ((uint64_t)s3 << 32);
}

/* The fixed final reduction of the 8 per-block partials (block b went into p[b % 8]). */
static inline float km_kq_reduce8(const float p[8]) {
    float a0 = p[0] + p[4];
    float a1 = p[1] + p[5];
    float a2 = p[2] + p[6];
    float a3 = p[3] + p[7];
    float b0 = a0 + a2;
    float b1 = a1 + a3;
    return b0 + b1;
}

/* The exact integer sums of one q4_k superblock in llama.cpp's repacked q4_K order (the refs of
 * linear.q4_k.q8_k.ggml.v1, N % 8 == 0, on the GGUF layout and on q4_k_c16): qs the 128 code bytes (chunk c:
 * low nibbles = sub-block 2c, high = 2c + 1), sc / mn the unpacked 6-bit scales and mins, x the q8_K block;
 * *isum = sum_j sc[j] * (sub-block j's 32 code * quant products), *imin = sum_j mn[j] * (bsums[2j] + bsums[2j+1]). */
static inline void km_q4k_repack_sums_ref(const uint8_t qs[KM_QK_K / 2], const uint8_t sc[8], const uint8_t mn[8],
                                          const km_block_q8_k *x, int32_t *isum, int32_t *imin) {
    int32_t is = 0, im = 0;
    for (int c = 0; c < 4; ++c) { /* 64 values per chunk: low nibbles (sub-block 2c), then high */
        const uint8_t *q = qs + 32 * c;
        const int8_t *q8 = x->qs + 64 * c;
        int32_t lo = 0, hi = 0;
        for (int l = 0; l < 32; ++l) {
            lo += (int32_t)(q[l] & 0x0F) * q8[l];
            hi += (int32_t)(q[l] >> 4) * q8[32 + l];
        }
        is += (int32_t)sc[2 * c] * lo + (int32_t)sc[2 * c + 1] * hi;
    }
    for (int j = 0; j < 8; ++j) im += (int32_t)mn[j] * ((int32_t)x->bsums[2 * j] + x->bsums[2 * j + 1]);
    *isum = is;
    *imin = im;
}

#endif /* KM_KQUANT_H */
