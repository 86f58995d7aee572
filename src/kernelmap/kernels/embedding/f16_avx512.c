/* embedding/f16_avx512.c — km_embedding_f16__avx512: contract embedding.f16.f32.v1.
 *
 * An instantiation of the family body embedding/embedding_body.h (byte-identical to km_embedding_f16__ref
 * for every (ith, nth), and so to the other ISAs' instantiations) on the AVX-512 F/BW/VL/DQ lanes (16-lane
 * zmm vectors).
 */
#include "km_lanes_avx512.h"
#include "embedding_body.h"

void km_embedding_f16__avx512(float *y, const void *table, const int32_t *ids, int64_t M, int64_t V, int64_t D,
                              float scale, int ith, int nth) {
    kem_embedding(y, table, ids, M, V, D, scale, ith, nth, KEM_F16);
}
