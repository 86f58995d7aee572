/* linear/q8_0_q8_0_ggml_c16_avx512vnni.c — km_linear_q8_0_q8_0_ggml_c16__avx512vnni: contract
 * linear.q8_0.q8_0.ggml.v1 on weights in the repacked layout "q8_0_c16".
 *
 * An instantiation of the family body linear/q8_0_c16_body.h (layout, numerics and the exactness argument are
 * there; byte-identical to km_linear_q8_0_q8_0_ggml_c16__ref for every (ith, nth) and M) on the AVX-512 lanes with
 * VNNI: per block and 16 rows, eight vpdpbusd on the stored code vectors, eight fmas; batches of 16+ rows take
 * linear/q32_gemm_body.h's GEMM with q8_0_q8_0_ggml_avx512vnni.c's schedule on panels loaded from this layout.
 */
#include "km_lanes_avx512.h"

#define KQC16_PF 8192 /* decode: prefetch distance in bytes: over 4096 from DRAM on Zen 4 +11% (1 thread) */
/* decode: into L1 (prefetcht0), not L2: Zen 4, from DRAM, the LM head's 1x262144x640 +14% on 1 thread (-5% on 2 in
 * benchmarks/ab_linear.py, but in the model 2 threads gained too: logits 5.66 -> 5.34 ms, step 0.93-0.97x),
 * 1x2048x640 and 1x640x2048 +5-14%. The K-quant c16 records prefetch in bursts of 36-53 lines per superblock: into
 * L1 those stalled the core (q6_K 0.37x); spread over the record, neutral either way, so they keep L2. */
#define KQC16_PFL1 1
#define KQ32G_NG 2     /* prefill GEMM: 16-column groups per panel */
#define KQ32G_MT1 4    /* prefill GEMM: activation rows per register tile (unused by q8_0's order) */
#define KQ32G_KB 32    /* prefill GEMM: blocks per weight panel */
#define KQ32G_MS 64    /* prefill GEMM: rows per super-tile (K of several panels) */
#define KQ32G_MIN_M 16 /* prefill GEMM: smallest batch */
#include "q8_0_c16_body.h"

void km_linear_q8_0_q8_0_ggml_c16__avx512vnni(float *y, const void *w, const void *x, int64_t M, int64_t N, int64_t K,
                                              int ith, int nth) {
    kqc16_linear(y, w, x, M, N, K, ith, nth);
}
