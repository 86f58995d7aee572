/* linear/iq4_nl_q8_0_ggml_c16_ref.c — km_linear_iq4_nl_q8_0_ggml_c16__ref: the scalar oracle of contract
 * linear.iq4_nl.q8_0.ggml.v1 on weights in the repacked layout "iq4_nl_c16".
 *
 * Same op and numerics as linear/iq4_nl_q8_0_ggml_ref.c (linear/iq4_nl_ref.h states them once); only where a
 * weight's bytes are differs: w is "iq4_nl_c16" (weights/repack.py states it), from which each block is rebuilt
 * (km_iq4nl_c16_block) before the shared block step. K a multiple of 32. Partition: groups of 16 output columns
 * (km_part over ceil(N / 16)); no output depends on (ith, nth) or M.
 */
#include "iq4_nl_ref.h"

void km_linear_iq4_nl_q8_0_ggml_c16__ref(float *y, const void *w, const void *x, int64_t M, int64_t N, int64_t K,
                                         int ith, int nth) {
    int64_t lo, hi;
    km_part((N + 15) / 16, ith, nth, &lo, &hi);
    km_iq4nl_ref_cols_at(y, w, km_iq4nl_c16_block, x, M, N, K, 16 * lo, 16 * hi < N ? 16 * hi : N);
}
