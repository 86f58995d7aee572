/* embedding/q4_0_avx2.c — km_embedding_q4_0__avx2: contract embedding.q4_0.f32.v1.
 *
 * An instantiation of the family body embedding/q32_embedding_body.h (numerics there). Bit-exact with
 * km_embedding_q4_0__ref for every (ith, nth), on the AVX2 + FMA + F16C lanes.
 */
#include "km_lanes_avx2.h"

#include "q32_embedding_body.h"

void km_embedding_q4_0__avx2(float *y, const void *table, const int32_t *ids, int64_t M, int64_t V, int64_t D,
                             float scale, int ith, int nth) {
    (void)V;
    kqe32_embedding(y, table, ids, M, D, scale, ith, nth, KL_Q32_Q4_0);
}
