/* embedding/q5_k_avx512.c — km_embedding_q5_k__avx512: contract embedding.q5_k.f32.v1.
 *
 * An instantiation of the family body embedding/q_k_embedding_body.h (numerics there; bit-exact with
 * km_embedding_q5_k__ref for every (ith, nth)) on the AVX-512 lanes.
 */
#include "km_lanes_avx512.h"

#include "q_k_embedding_body.h"

void km_embedding_q5_k__avx512(float *y, const void *table, const int32_t *ids, int64_t M, int64_t V, int64_t D, float scale, int ith,
                               int nth) {
    (void)V;
    kqe_embedding(y, table, ids, M, D, scale, ith, nth, KL_KQ_Q5_K);
}
