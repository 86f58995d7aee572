/* km_kquant.h — helpers shared by the k-quant kernels (q4_k, q6_k weights x q8_k activations).
 *
 * Contract: ISA-free inline helpers only. km_q4k_scales() unpacks the 12-byte 6-bit scale/min
 * table of a q4_k block into 8 scales and 8 mins (values 0..63). km_kq_reduce8() is the fixed
 * pairwise tree every k-quant linear variant uses to fold its 8 per-block partial sums:
 *     ((p0 + p4) + (p2 + p6)) + ((p1 + p5) + (p3 + p7))
 * (the order a 256-bit lane fold produces: halves, then pairs, then the last two lanes).
 * Plain float adds, no FMA; the caller is compiled with -ffp-contract=off.
 */
#ifndef KM_KQUANT_H
#define KM_KQUANT_H

#include "km_common.h"

/* q4_k: sub-block j (values 32j..32j+31) has scale sc[j] and min mn[j], both in 0..63. */
static inline void km_q4k_scales(const uint8_t q[KM_K_SCALE_SIZE], uint8_t sc[8], uint8_t mn[8]) {
    for (int j = 0; j < 4; ++j) {
        sc[j] = q[j] & 63;
        mn[j] = q[j + 4] & 63;
    }
    for (int j = 4; j < 8; ++j) {
        sc[j] = (uint8_t)((q[j + 4] & 0x0F) | ((q[j - 4] >> 6) << 4));
        mn[j] = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
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

#endif /* KM_KQUANT_H */
