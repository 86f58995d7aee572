/* fused/geglu_quantize_ref.c — km_geglu_quantize_q8_k__ref and km_geglu_quantize_q8_0_rne__ref: the scalar oracles
 * of contracts geglu_quantize.tanh.q8_k.v1 and geglu_quantize.tanh.q8_0.rne.v1.
 *
 * Op: for gate, up f32 [M, F] (row-major): h = geglu(gate, up) elementwise as geglu.tanh.f32.v1 computes it
 * (geglu/geglu_ref.h: llama.cpp's table-based tanh GELU of the f16-rounded gate, times up), then q = h quantized
 * block by block as the activation quantizer computes it: quantize_act.q8_k.v1 (rows of F / 256 q8_k blocks, 292
 * bytes; common/km_q8_k_ref.h) or quantize_act.q8_0.rne.v1 (llama.cpp's x86 activation rule, rows of F / 32 q8_0
 * blocks, 34 bytes; common/km_q8_0_ref.h). h lives only in a stack buffer of one block; q aliases nothing.
 * F % 256 == 0 (q8_k), F % 32 == 0 (q8_0).
 * Numerics: exactly geglu.tanh.f32.v1 then the quantizer, so the fused op is bit-identical with the unfused pair
 * (the quantizer's inputs must be finite there as here).
 * Partition: the M * F / QK blocks as one flat range (km_part); blocks are independent, so any (ith, nth) gives
 * the same bytes.
 */
#include "km_q8_0_ref.h"
#include "km_q8_k_ref.h"
#include "../geglu/geglu_ref.h"

/* Both maps' entry points live in this one unit; each is declared here, since a build that selects one map's
 * variant declares only that one (builds refuse undeclared exports). */
void km_geglu_quantize_q8_k__ref(void *q, const float *gate, const float *up, int64_t M, int64_t F, int ith,
        int nth);
void km_geglu_quantize_q8_0_rne__ref(void *q, const float *gate, const float *up, int64_t M, int64_t F, int ith,
        int nth);

/* The blocks [lo, hi) of the partition: their qk products of gate and up, each block quantized (q8_k: 256 values, else
 * q8_0 by the rne rule: 32). */
static void geglu_quantize(void *q, const float *gate, const float *up, int64_t M, int64_t F, int ith, int nth,
        int q8_k) {
    const int qk = q8_k ? KM_QK_K : KM_QK8_0;
    int64_t lo, hi;
    km_part(M * (F / qk), ith, nth, &lo, &hi);
    for (int64_t b = lo; b < hi; b++) {
        float h[KM_QK_K]; /* [qk] the block's products */
        for (int i = 0; i < qk; i++) h[i] = kgg_geglu1_ref(gate[b * qk + i], up[b * qk + i]);
        if (q8_k) km_q8_k_block_ref(h, (km_block_q8_k *)q + b);
        else km_q8_0_rne_block_ref((km_block_q8_0 *)q + b, h);
    }
}

void km_geglu_quantize_q8_k__ref(void *q, const float *gate, const float *up, int64_t M, int64_t F, int ith,
        int nth) {
    geglu_quantize(q, gate, up, M, F, ith, nth, 1);
}

void km_geglu_quantize_q8_0_rne__ref(void *q, const float *gate, const float *up, int64_t M, int64_t F, int ith,
        int nth) {
    geglu_quantize(q, gate, up, M, F, ith, nth, 0);
}
