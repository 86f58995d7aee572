/* batch/rows_family.h — the per-row loops of the batch phase's family rope (rope with a freq-factors tensor).
 *
 * As rows_body.h: row r of the batch is the next token of a sequence at position positions[r]; the wrapper
 * calls the one-row kernel of the decode path (the entry point of the map it `calls`) once per row with
 * M = 1, that row's position and the caller's (ith, nth), so row r gets exactly the bits the decode call
 * of its sequence would. Rows write disjoint outputs. No arithmetic happens here.
 */
#ifndef KM_BATCH_ROWS_FAMILY_H
#define KM_BATCH_ROWS_FAMILY_H

#include <stdint.h>

typedef void (*km_rows_rope_ff_fn)(float *y, const float *x, const float *f, int64_t M, int64_t H, int64_t D,
                                   int64_t pos, float freq_base, float freq_scale, int ith, int nth);

/* x, y: f32 [M, H*D]; f: f32 [D/2] freq factors; row r rotated at positions[r]. */
static inline void km_rows_rope_ff(km_rows_rope_ff_fn fn, float *y, const float *x, const float *f, int64_t M,
                                   int64_t H, int64_t D, const int64_t *positions, float freq_base,
                                   float freq_scale, int ith, int nth) {
    for (int64_t r = 0; r < M; r++)
        fn(y + r * H * D, x + r * H * D, f, 1, H, D, positions[r], freq_base, freq_scale, ith, nth);
}

#endif /* KM_BATCH_ROWS_FAMILY_H */
