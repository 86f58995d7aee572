/* embedding/bf16_neon.c — km_embedding_bf16__neon: contract embedding.bf16.f32.v1.
 *
 * An instantiation of the family body embedding/float_embedding_body.h (numerics there). Bit-exact with
 * km_embedding_bf16__ref (and so to the x86 variants) for every (ith, nth), on the AArch64 AdvSIMD lanes.
 */
#include "km_lanes_neon.h"

#include "float_embedding_body.h"

void km_embedding_bf16__neon(float *y, const void *table, const int32_t *ids, int64_t M, int64_t V, int64_t D,
                             float scale, int ith, int nth) {
    (void)V;
    kfe_embedding(y, table, ids, M, D, scale, ith, nth, KFE_BF16);
}
