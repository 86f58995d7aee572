/* embedding/q8_0_neon.c — km_embedding_q8_0__neon: contract embedding.q8_0.f32.v1.
 *
 * An instantiation of the family body embedding/embedding_body.h (byte-identical to km_embedding_q8_0__ref
 * for every (ith, nth), and so to the other ISAs' instantiations) on the AArch64 AdvSIMD lanes (4-lane q
 * registers).
 */
#include "km_lanes_neon.h"
#include "embedding_body.h"

void km_embedding_q8_0__neon(float *y, const void *table, const int32_t *ids, int64_t M, int64_t V, int64_t D,
                             float scale, int ith, int nth) {
    kem_embedding(y, table, ids, M, V, D, scale, ith, nth, KEM_Q8_0);
}
