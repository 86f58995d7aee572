/* km_common.h — shared definitions for every Kernelmap C kernel.
 *
 * Contract: GGML block layouts (byte-compatible with GGUF tensor data), IEEE half <-> float
 * conversion with round-to-nearest-even, and the work-partition helper every kernel uses.
 * Nothing here depends on an ISA; SIMD helpers live in the variant files that need them.
 *
 * Work partition: every kernel takes (ith, nth) as its last two arguments and computes only its
 * slice of the partition dimension its contract names (usually output rows). The slice bounds
 * come from km_part(), so the split is the same for every kernel, and a kernel never splits a
 * reduction across threads: results are bit-identical for any nth.
 */
#ifndef KM_COMMON_H
#define KM_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define KM_QK8_0 32
#define KM_QK4_0 32
#define KM_QK5_0 32
#define KM_QK_K 256
#define KM_K_SCALE_SIZE 12

typedef uint16_t km_half;

/* q8_0: 32 values, one f16 scale. 34 bytes. */
typedef struct {
    km_half d;
    int8_t qs[KM_QK8_0];
} km_block_q8_0;

/* q4_0: 32 values as 4-bit nibbles (low nibbles = elements 0..15, high = 16..31), offset 8. 18 bytes. */
typedef struct {
    km_half d;
    uint8_t qs[KM_QK4_0 / 2];
} km_block_q4_0;

/* iq4_nl: 32 values, each a nibble indexing the 16-entry table km_iq4_nl_values (low nibbles = elements 0..15,
 * high = 16..31), times d. The layout of q4_0. 18 bytes. */
typedef km_block_q4_0 km_block_iq4_nl;
static const int8_t km_iq4_nl_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

/* q5_0: like q4_0 plus a 5th bit per element in qh (bit j = element j). 22 bytes. */
typedef struct {
    km_half d;
    uint8_t qh[4];
    uint8_t qs[KM_QK5_0 / 2];
} km_block_q5_0;

/* q4_k: 256 values in 8 sub-blocks of 32; 6-bit scales and mins packed in 12 bytes. 144 bytes. */
typedef struct {
    km_half d;
    km_half dmin;
    uint8_t scales[KM_K_SCALE_SIZE];
    uint8_t qs[KM_QK_K / 2];
} km_block_q4_k;

/* q5_k: q4_k plus one high bit per value. 176 bytes. */
typedef struct {
    km_half d;
    km_half dmin;
    uint8_t scales[KM_K_SCALE_SIZE];
    uint8_t qh[KM_QK_K / 8];
    uint8_t qs[KM_QK_K / 2];
} km_block_q5_k;

/* q6_k: 256 values, low 4 bits in ql, high 2 bits in qh, 16 int8 scales, f16 super-scale. 210 bytes. */
typedef struct {
    uint8_t ql[KM_QK_K / 2];
    uint8_t qh[KM_QK_K / 4];
    int8_t scales[KM_QK_K / 16];
    km_half d;
} km_block_q6_k;

/* q8_k: activation format for k-quants: f32 scale, 256 int8 values, 16 sums of 16 values. 292 bytes. */
typedef struct {
    float d;
    int8_t qs[KM_QK_K];
    int16_t bsums[KM_QK_K / 16];
} km_block_q8_k;

_Static_assert(sizeof(km_block_q8_0) == 34, "q8_0 block size");
_Static_assert(sizeof(km_block_q4_0) == 18, "q4_0 block size");
_Static_assert(sizeof(km_block_q5_0) == 22, "q5_0 block size");
_Static_assert(sizeof(km_block_q4_k) == 144, "q4_k block size");
_Static_assert(sizeof(km_block_q5_k) == 176, "q5_k block size");
_Static_assert(sizeof(km_block_q6_k) == 210, "q6_k block size");
_Static_assert(sizeof(km_block_q8_k) == 292, "q8_k block size");

/* Exact half -> float (every half is representable as a float). */
static inline float km_fp16_to_fp32(km_half h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1Fu;
    uint32_t man = h & 0x3FFu;
    uint32_t bits;
    if (exp == 0) {
        if (man == 0) {
            bits = sign;
        } else { /* subnormal half: normalise */
            int e = -1;
            do {
                man <<= 1;
                e++;
            } while ((man & 0x400u) == 0);
            man &= 0x3FFu;
            bits = sign | ((uint32_t)(127 - 15 - e) << 23) | (man << 13);
        }
    } else if (exp == 0x1F) {
        bits = sign | 0x7F800000u | (man << 13);
    } else {
        bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* float -> half, round to nearest even (the rounding F16C's vcvtps2ph with imm 0 performs). */
static inline km_half km_fp32_to_fp16(float f) {
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t absx = x & 0x7FFFFFFFu;
    if (absx >= 0x7F800000u) { /* inf or nan */
        return (km_half)(sign | 0x7C00u | (absx > 0x7F800000u ? 0x200u : 0u));
    }
    if (absx >= 0x477FF000u) { /* rounds to >= 65520: overflow to inf */
        return (km_half)(sign | 0x7C00u);
    }
    if (absx < 0x38800000u) { /* result is subnormal or zero */
        if (absx < 0x33000000u) return (km_half)sign; /* < 2^-25 rounds to zero */
        uint32_t e = absx >> 23;
        uint32_t m = (absx & 0x7FFFFFu) | 0x800000u;
        uint32_t shift = 126u - e; /* 14..24 */
        uint32_t half_m = m >> shift;
        uint32_t rem = m & ((1u << shift) - 1u);
        uint32_t halfway = 1u << (shift - 1u);
        if (rem > halfway || (rem == halfway && (half_m & 1u))) half_m++;
        return (km_half)(sign | half_m);
    }
    uint32_t r = absx + 0xFFFu + ((absx >> 13) & 1u); /* round to nearest even on bit 13 */
    return (km_half)(sign | ((r - 0x38000000u) >> 13));
}

/* The slice [*lo, *hi) of n items that thread ith of nth owns: contiguous, balanced, deterministic. */
static inline void km_part(int64_t n, int ith, int nth, int64_t *lo, int64_t *hi) {
    if (nth < 1) nth = 1;
    if (ith < 0) ith = 0;
    int64_t per = n / nth;
    int64_t extra = n % nth;
    int64_t start = (int64_t)ith * per + (ith < extra ? ith : extra);
    *lo = start;
    *hi = start + per + (ith < extra ? 1 : 0);
}

#endif /* KM_COMMON_H */
