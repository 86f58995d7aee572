/* linear/iq4_nl_q8_0_ggml_c16_avx512vnni.c — km_linear_iq4_nl_q8_0_ggml_c16__avx512vnni: contract
 * linear.iq4_nl.q8_0.ggml.v1 on weights in the repacked layout "iq4_nl_c16".
 *
 * An instantiation of the family body linear/iq4_nl_body.h (numerics, exactness and schedule there) on the AVX-512
 * lanes with VNNI, source layout "iq4_nl_c16": byte-identical to km_linear_iq4_nl_q8_0_ggml_c16__ref (and so to the
 * GGUF-layout ref) for every (ith, nth) and M. Per block and 16 columns, 4 64-byte loads, two nibble masks
 * and 8 vpshufb lookups, then 8 vpdpbusd per activation row.
 */
#include "km_lanes_avx512.h"

#define KIQ_MT 4     /* activation rows per register tile */
#define KIQ_KB 32    /* blocks per panel chunk (32 x 576 bytes) */
#define KIQ_PF 8192  /* decode: prefetch distance in bytes along the thread's groups (to L2) */
#include "iq4_nl_body.h"

void km_linear_iq4_nl_q8_0_ggml_c16__avx512vnni(float *y, const void *w, const void *x, int64_t M, int64_t N, int64_t K,
                                                int ith, int nth) {
    kiq_linear(y, w, x, M, N, K, ith, nth, 1);
}
