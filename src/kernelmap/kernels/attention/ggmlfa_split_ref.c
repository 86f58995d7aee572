/* attention/ggmlfa_split_ref.c — km_attention_f16kv_ggmlfa_split2__ref, km_attention_f16kv_ggmlfa_split4__ref:
 * the scalar oracles of contracts attention.f16kv.ggml_fa_split2.v1 and attention.f16kv.ggml_fa_split4.v1.
 *
 * Op: as attention.f16kv.ggml_fa.v1 (ggmlfa_ref.c): causal GQA attention of q f32 [M, Hq*D] (row m at
 * position p = pos + m) over the head-major caches k_cache, v_cache f16 [Hkv][C][D]; output y f32 [M, Hq*D];
 * query head h reads KV head h / (Hq/Hkv); row m sees keys j0 .. p (j0 = p - window + 1 when window > 0
 * and that is positive, else 0). The caller guarantees that keys 0 .. pos+M-1 are written.
 * KV layout: C cells per KV head, key j in cell j mod C. C >= every position is the full-length layout
 * (cell = position); a smaller C is a ring buffer (the map's cache ports declare "ring": "window"): the
 * caller then guarantees C >= window + M - 1 and that the cells hold keys j0(pos) .. pos+M-1. Keys are
 * visited in increasing position whatever the cells (after a wrap: cells j0 mod C .. C-1, then 0 ..), so
 * the bits do not depend on C.
 * The key ranges of the N-thread split are position ranges (llama.cpp's cells with swa_full: cell =
 * position), so the ring changes only where a key is read from.
 * Constraints: D a multiple of 16, D <= 512, Hq a multiple of Hkv.
 * Numerics: bit for bit llama.cpp's CPU flash attention decoding each row alone with N threads (N = 2 or
 * 4, the number in the contract; llama.cpp 0.3.36, f16 K and V, Q scaled before the attention, kq_scale 1):
 * a row whose llama.cpp KV view has fewer than 512 cells is computed exactly as ggml_fa.v1; from 512 cells
 * on, the visible keys are cut into llama.cpp's N cell ranges, each range runs ggml_fa.v1's online softmax
 * from a fresh state (M = -inf, S = 0, VKQ = 0 f16), and the partials are merged in f32 in range order
 * (attention_ggmlfa_split.h states the ranges and the merge exactly). Results do not depend on (ith, nth):
 * N is the contract's, not our thread count.
 * Partition: (row, head) items it = m*Hq + h in contiguous ranges of equal work (attention_ggmlfa_part.h);
 * no reduction crosses items.
 */
#include "attention_ggmlfa_split_ref.h"

/* Both maps' entry points live in this one unit; each is declared here, since a build that selects one
 * map's variant declares only that one (builds refuse undeclared exports). */
void km_attention_f16kv_ggmlfa_split2__ref(float *y, const float *q, const void *k_cache, const void *v_cache,
        int64_t M, int64_t Hq, int64_t Hkv, int64_t D, int64_t C, int64_t pos, float scale, int64_t window, int ith,
        int nth);
void km_attention_f16kv_ggmlfa_split4__ref(float *y, const float *q, const void *k_cache, const void *v_cache,
        int64_t M, int64_t Hq, int64_t Hkv, int64_t D, int64_t C, int64_t pos, float scale, int64_t window, int ith,
        int nth);

void km_attention_f16kv_ggmlfa_split2__ref(float *y, const float *q, const void *k_cache, const void *v_cache,
        int64_t M, int64_t Hq, int64_t Hkv, int64_t D, int64_t C, int64_t pos, float scale,
        int64_t window, int ith, int nth) {
    km_fa_split_ref(y, q, k_cache, v_cache, M, Hq, Hkv, C, D, pos, scale, 1.0f, window, 2, ith, nth);
}

void km_attention_f16kv_ggmlfa_split4__ref(float *y, const float *q, const void *k_cache, const void *v_cache,
        int64_t M, int64_t Hq, int64_t Hkv, int64_t D, int64_t C, int64_t pos, float scale,
        int64_t window, int ith, int nth) {
    km_fa_split_ref(y, q, k_cache, v_cache, M, Hq, Hkv, C, D, pos, scale, 1.0f, window, 4, ith, nth);
}
