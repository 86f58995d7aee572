/* embedding/q4_1_avx512.c — km_embedding_q4_1__avx512: contract embedding.q4_1.f32.v1.
 *
 * An instantiation of the family body embedding/q32_embedding_body.h (numerics there). Bit-exact with
 * km_embedding_q4_1__ref for every (ith, nth), on the AVX-512 F/BW/VL/DQ lanes.
 */
#include "km_lanes_avx512.h"

#include "q32_embedding_body.h"

void km_embedding_q4_1__avx512(float *y, const void *table, const int32_t *ids, int64_t M, int64_t V, int64_t D,
                               float scale, int ith, int nth) {
    (void)V;
    kqe32_embedding(y, table, ids, M, D, scale, ith, nth, KL_Q32_Q4_1);
}
