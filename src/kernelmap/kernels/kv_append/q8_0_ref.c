/* kv_append/q8_0_ref.c — km_kv_append_q8_0__ref: the scalar oracle of contract kv_append.q8_0.rne.v1.
 *
 * Op: write the rows of x f32 [M, H*D] (row-major; row m at position pos + m) into the head-major q8_0
 * cache [H][C][D/32 blocks of 34 bytes] of C cells, position j in cell j mod C (C >= every position: the
 * full-length layout; smaller: a ring buffer, the map's port declares "ring": "write"). The caller guarantees
 * 0 <= pos, M <= C and D % 32 == 0.
 * Numerics: llama.cpp's KV write into a q8_0 cache (ggml_set_rows with the CPU from_float of GGML_TYPE_Q8_0,
 * quantize_row_q8_0 of its x86 build): every 32 values of a row are one block by the rule of contract
 * quantize_act.q8_0.rne.v1 (common/km_q8_0_ref.h: d = fp16(amax / 127), quants rint(x * 127/amax),
 * halves to even). A block does not depend on the others, so how llama.cpp cuts its rows (Hkv*D values per
 * cell) does not matter. Inputs must be finite. Checked against ggml's own bytes
 * (tests/kernels/test_attention_q8kv.py, fixture tests/fixtures/llama_ops/kvq8.npz).
 * Partition: (row, head) items, km_part over M*H (each item one D-long run; no reductions).
 */
#include "km_common.h"
#include "km_q8_0_ref.h"

void km_kv_append_q8_0__ref(void *cache, const float *x, int64_t M, int64_t H, int64_t D, int64_t C,
        int64_t pos, int ith, int nth) {
    km_block_q8_0 *kv = (km_block_q8_0 *)cache; /* [H][C][D/32] */
    const int64_t nb = D / KM_QK8_0;
    int64_t lo, hi;
    km_part(M * H, ith, nth, &lo, &hi);
    for (int64_t it = lo; it < hi; it++) { /* it = m * H + h */
        const int64_t m = it / H, h = it % H;
        km_block_q8_0 *dst = kv + (h * C + (pos + m) % C) * nb;
        for (int64_t b = 0; b < nb; b++) km_q8_0_rne_block_ref(dst + b, x + it * D + b * KM_QK8_0);
    }
}
