/* linear/iq4_nl_q8_0_ggml_ref.c — km_linear_iq4_nl_q8_0_ggml__ref: the scalar oracle of linear.iq4_nl.q8_0.ggml.v1.
 *
 * Numerics and op: linear/iq4_nl_ref.h (llama.cpp's x86 iq4_nl arithmetic, two orders chosen by N % 8). FMA is part
 * of the contract; every variant is bit-exact with this file.
 * Partition: output columns n (km_part over N); results are identical for every (ith, nth) and M.
 */
#include "iq4_nl_ref.h"

void km_linear_iq4_nl_q8_0_ggml__ref(float *y, const void *w, const void *x, int64_t M, int64_t N, int64_t K,
                                     int ith, int nth) {
    int64_t lo, hi;
    km_part(N, ith, nth, &lo, &hi);
    km_iq4nl_ref_cols(y, w, x, M, N, K, lo, hi);
}
