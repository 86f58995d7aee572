/* batch/rows_body.h — the per-row loops of the batch phase's position-dependent providers.
 *
 * The batch phase advances M sequences by one token in one call: row r is the next token of the
 * sequence at position positions[r] whose KV cache is slot slots[r]. A KV state buffer holds one
 * head-major cache [H][C][D] per slot (layout kv_slot_head_major), slot s starting s*H*C*D elements in.
 * A cache row holds the D values of one (head, cell) in the cache's type: row_bytes bytes (f16: 2 * D, a
 * block type such as q8_0: its whole blocks, 34 bytes per 32 values), so a slot is H * C * row_bytes.
 * Each wrapper calls the one-row kernel of the decode path (the entry point of the map it `calls`, the
 * variant of the same name) once per row, with M = 1, that row's position, that slot's cache and the
 * caller's (ith, nth): row r gets exactly the bits the decode call of its sequence would (same kernel,
 * same arguments, same partition). Rows write disjoint outputs and cache rows (the batch entry refuses
 * two rows on one slot), so nothing separates them but the loop. No arithmetic happens here.
 */
#ifndef KM_BATCH_ROWS_BODY_H
#define KM_BATCH_ROWS_BODY_H

#include <stddef.h>
#include <stdint.h>

/* The bytes of one q8_0 cache row of D values (D a multiple of 32): D / 32 blocks of an f16 scale and 32 int8. */
#define KM_ROWS_Q8_0_ROW(D) ((size_t)(D) / 32u * 34u)

typedef void (*km_rows_rope_fn)(float *y, const float *x, int64_t M, int64_t H, int64_t D, int64_t pos,
                                float freq_base, float freq_scale, int ith, int nth);
typedef void (*km_rows_kv_append_fn)(void *cache, const float *x, int64_t M, int64_t H, int64_t D, int64_t C,
                                     int64_t pos, int ith, int nth);
typedef void (*km_rows_attention_fn)(float *y, const float *q, const void *k_cache, const void *v_cache,
                                     int64_t M, int64_t Hq, int64_t Hkv, int64_t D, int64_t C, int64_t pos,
                                     float scale, int64_t window, int ith, int nth);
typedef void (*km_rows_qk_norm_rope_fn)(float *y, const float *x, const float *w, int64_t M, int64_t H,
                                        int64_t D, int64_t pos, float eps, float freq_base, float freq_scale,
                                        int ith, int nth);

/* x, y: f32 [M, H*D]; row r rotated at positions[r]. */
static inline void km_rows_rope(km_rows_rope_fn fn, float *y, const float *x, int64_t M, int64_t H, int64_t D,
                                const int64_t *positions, float freq_base, float freq_scale, int ith, int nth) {
    for (int64_t r = 0; r < M; r++)
        fn(y + r * H * D, x + r * H * D, 1, H, D, positions[r], freq_base, freq_scale, ith, nth);
}

/* cache: [slots][H][C] rows of row_bytes bytes; x: f32 [M, H*D]; row r goes to slot slots[r], cell of positions[r]. */
static inline void km_rows_kv_append_rb(km_rows_kv_append_fn fn, size_t row_bytes, void *cache, const float *x,
                                        int64_t M, int64_t H, int64_t D, int64_t C, const int64_t *positions,
                                        const int64_t *slots, int ith, int nth) {
    const size_t slot_bytes = row_bytes * (size_t)(H * C);
    for (int64_t r = 0; r < M; r++)
        fn((uint8_t *)cache + (size_t)slots[r] * slot_bytes, x + r * H * D, 1, H, D, C, positions[r], ith, nth);
}

/* km_rows_kv_append_rb for a cache of elem-byte values (row_bytes = elem * D). */
static inline void km_rows_kv_append(km_rows_kv_append_fn fn, size_t elem, void *cache, const float *x, int64_t M,
                                     int64_t H, int64_t D, int64_t C, const int64_t *positions,
                                     const int64_t *slots, int ith, int nth) {
    km_rows_kv_append_rb(fn, elem * (size_t)D, cache, x, M, H, D, C, positions, slots, ith, nth);
}

/* q, y: f32 [M, Hq*D]; caches [slots][Hkv][C] rows of row_bytes bytes; row r attends to keys 0..positions[r]
 * of slot slots[r]. */
static inline void km_rows_attention_rb(km_rows_attention_fn fn, size_t row_bytes, float *y, const float *q,
                                        const void *k_cache, const void *v_cache, int64_t M, int64_t Hq,
                                        int64_t Hkv, int64_t D, int64_t C, const int64_t *positions,
                                        const int64_t *slots, float scale, int64_t window, int ith, int nth) {
    const size_t slot_bytes = row_bytes * (size_t)(Hkv * C);
    for (int64_t r = 0; r < M; r++) {
        const size_t at = (size_t)slots[r] * slot_bytes;
        fn(y + r * Hq * D, q + r * Hq * D, (const uint8_t *)k_cache + at, (const uint8_t *)v_cache + at, 1, Hq, Hkv,
           D, C, positions[r], scale, window, ith, nth);
    }
}

/* km_rows_attention_rb for caches of elem-byte values (row_bytes = elem * D). */
static inline void km_rows_attention(km_rows_attention_fn fn, size_t elem, float *y, const float *q,
                                     const void *k_cache, const void *v_cache, int64_t M, int64_t Hq, int64_t Hkv,
                                     int64_t D, int64_t C, const int64_t *positions, const int64_t *slots,
                                     float scale, int64_t window, int ith, int nth) {
    km_rows_attention_rb(fn, elem * (size_t)D, y, q, k_cache, v_cache, M, Hq, Hkv, D, C, positions, slots, scale,
                         window, ith, nth);
}

/* x, y: f32 [M, H*D]; w: f32 [D]; row r normalised, then rotated at positions[r]. */
static inline void km_rows_qk_norm_rope(km_rows_qk_norm_rope_fn fn, float *y, const float *x, const float *w,
                                        int64_t M, int64_t H, int64_t D, const int64_t *positions, float eps,
                                        float freq_base, float freq_scale, int ith, int nth) {
    for (int64_t r = 0; r < M; r++)
        fn(y + r * H * D, x + r * H * D, w, 1, H, D, positions[r], eps, freq_base, freq_scale, ith, nth);
}

#endif /* KM_BATCH_ROWS_BODY_H */
