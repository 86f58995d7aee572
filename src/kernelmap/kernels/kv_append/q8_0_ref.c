/* kv_append/q8_0_ref.c — km_kv_append_q8_0__ref, km_kv_append_q8_0_rotk__ref, km_kv_append_q8_0_rotv__ref: the
 * scalar oracles of contracts kv_append.q8_0.rne.v1, kv_append.q8_0.rot_k.v1 and kv_append.q8_0.rot_v.v1.
 *
 * Op: write the rows of x f32 [M, H*D] (row-major; row m at position pos + m) into the head-major q8_0
 * cache [H][C][D/32 blocks of 34 bytes] of C cells, position j in cell j mod C (C >= every position: the
 * full-length layout; smaller: a ring buffer, the map's port declares "ring": "write"). The caller guarantees
 * 0 <= pos, M <= C, D % 32 == 0 and D <= 512.
 * Numerics: llama.cpp's KV write into a q8_0 cache (ggml_set_rows with the CPU from_float of GGML_TYPE_Q8_0,
 * quantize_row_q8_0 of its x86 build): every 32 values of a row are one block by the rule of contract
 * quantize_act.q8_0.rne.v1 (common/km_q8_0_ref.h: d = fp16(amax / 127), quants rint(x * 127/amax),
 * halves to even). A block does not depend on the others, so how llama.cpp cuts its rows (Hkv*D values per
 * cell) does not matter. Inputs must be finite. Checked against ggml's own bytes
 * (tests/kernels/test_attention_q8kv.py, fixture tests/fixtures/llama_ops/kvq8.npz).
 * The rot_k / rot_v contracts first rotate each run as llama.cpp 0.3.36 does before it writes a quantized cache
 * (common/km_q8_0_ref.h km_fwht_ref: K rows in blocks of km_kv_rot_k(D), the largest power of two dividing D, V rows
 * in blocks of 64; D % 64 == 0), then quantize the rotated values as above.
 * Partition: (row, head) items, km_part over M*H (each item one D-long run; no reductions).
 */
#include "km_common.h"
#include "km_q8_0_ref.h"

#define KM_KVQ8_DMAX 512

/* rot = 0: the plain write; else each run is rotated in blocks of rot values (km_fwht_ref) before it is quantized */
static void append(void *cache, const float *x, int64_t M, int64_t H, int64_t D, int64_t C, int64_t pos, int64_t rot,
        int ith, int nth) {
    km_block_q8_0 *kv = (km_block_q8_0 *)cache; /* [H][C][D/32] */
    const int64_t nb = D / KM_QK8_0;
    int64_t lo, hi;
    km_part(M * H, ith, nth, &lo, &hi);
    for (int64_t it = lo; it < hi; it++) { /* it = m * H + h */
        const int64_t m = it / H, h = it % H;
        km_block_q8_0 *dst = kv + (h * C + (pos + m) % C) * nb;
        float r[KM_KVQ8_DMAX];
        const float *src = x + it * D;
        if (rot > 0) {
            for (int64_t b = 0; b < D; b += rot) km_fwht_ref(r + b, src + b, rot);
            src = r;
        }
        for (int64_t b = 0; b < nb; b++) km_q8_0_rne_block_ref(dst + b, src + b * KM_QK8_0);
    }
}

/* The three maps' entry points live in this one unit; each is declared here, since a build that selects one
 * map's variant declares only that one (builds refuse undeclared exports). */
void km_kv_append_q8_0__ref(void *cache, const float *x, int64_t M, int64_t H, int64_t D, int64_t C, int64_t pos,
        int ith, int nth);
void km_kv_append_q8_0_rotk__ref(void *cache, const float *x, int64_t M, int64_t H, int64_t D, int64_t C,
        int64_t pos, int ith, int nth);
void km_kv_append_q8_0_rotv__ref(void *cache, const float *x, int64_t M, int64_t H, int64_t D, int64_t C,
        int64_t pos, int ith, int nth);

void km_kv_append_q8_0__ref(void *cache, const float *x, int64_t M, int64_t H, int64_t D, int64_t C, int64_t pos,
        int ith, int nth) {
    append(cache, x, M, H, D, C, pos, 0, ith, nth);
}

void km_kv_append_q8_0_rotk__ref(void *cache, const float *x, int64_t M, int64_t H, int64_t D, int64_t C,
        int64_t pos, int ith, int nth) {
    append(cache, x, M, H, D, C, pos, km_kv_rot_k(D), ith, nth);
}

void km_kv_append_q8_0_rotv__ref(void *cache, const float *x, int64_t M, int64_t H, int64_t D, int64_t C,
        int64_t pos, int ith, int nth) {
    append(cache, x, M, H, D, C, pos, KM_KV_ROT_V, ith, nth);
}
