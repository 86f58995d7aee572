/* embedding/q4_0_neon.c — km_embedding_q4_0__neon: contract embedding.q4_0.f32.v1.
 *
 * An instantiation of the family body embedding/q32_embedding_body.h (numerics there). Bit-exact with
 * km_embedding_q4_0__ref (and so to the x86 variants) for every (ith, nth), on the AArch64 AdvSIMD lanes.
 */
#include "km_lanes_neon.h"

#include "q32_embedding_body.h"

void km_embedding_q4_0__neon(float *y, const void *table, const int32_t *ids, int64_t M, int64_t V, int64_t D,
                             float scale, int ith, int nth) {
    (void)V;
    kqe32_embedding(y, table, ids, M, D, scale, ith, nth, KL_Q32_Q4_0);
}
