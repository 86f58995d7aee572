/* swiglu/ggml_body.h — the row walk of every swiglu.f32.ggml.v1 variant; the including file supplies the lanes.
 *
 * Contract swiglu.f32.ggml.v1 (ggml_f32_ref.c): y = silu(gate) * up over f32 [M, F]; in each row the
 * columns below F - F%16 take one lane of llama.cpp's AVX-512 ggml_v_silu (common/km_ggml_expf.h), the
 * last F%16 the scalar x / (1 + expf(-x)) with libm expf; then one f32 multiply by up. Every lane depends
 * on its own element only, so a variant may group the vector columns of a row in any number of lanes: the
 * including file defines KSG_LANES and ksg_lanes(y, gate, up), which computes KSG_LANES consecutive vector
 * columns exactly as that many lanes of ggml_v_silu(gate) * up; the columns left over from its groups take
 * the scalar emulation of the same lane (km_ggml_v_silu). Partition: the flat M*F range in 16-element
 * chunks (km_part over chunks), as the ref; each thread reads and writes only its own elements, so y may
 * alias gate or up.
 * Numerics parameters (defaults: the AVX-512 build's swiglu.f32.ggml.v1): KSG_VW, the peer's vector width (the
 * columns below F - F % KSG_VW take the vector lane), and KSG_SILU, the scalar emulation of one lane of its
 * ggml_v_silu. swiglu.f32.ggml_exp8.v1 (llama.cpp's AVX2 build) sets 8 and km_ggml_v_silu8.
 */
#ifndef KM_SWIGLU_GGML_BODY_H
#define KM_SWIGLU_GGML_BODY_H

#include <math.h>

#include "km_common.h"
#include "km_expf.h"
#include "km_ggml_expf.h"

#ifndef KSG_VW
#define KSG_VW 16
#endif
#ifndef KSG_SILU
#define KSG_SILU km_ggml_v_silu
#endif

static inline void ksg_rows(float *y, const float *gate, const float *up, int64_t M, int64_t F, int ith, int nth) {
    int64_t c0, c1;
    km_part((M * F + 15) / 16, ith, nth, &c0, &c1);
    const int64_t lo = c0 * 16, hi = c1 * 16 < M * F ? c1 * 16 : M * F;
    const int64_t vec_end = F - F % KSG_VW; /* columns below this take the vector lane */
    for (int64_t i = lo; i < hi;) {
        const int64_t row0 = i - i % F;
        const int64_t seg_end = row0 + F < hi ? row0 + F : hi;       /* end of this row's part in [lo, hi) */
        const int64_t lane_end = row0 + vec_end < seg_end ? row0 + vec_end : seg_end;
        for (; i + KSG_LANES <= lane_end; i += KSG_LANES) ksg_lanes(y + i, gate + i, up + i);
        for (; i < lane_end; i++) y[i] = KSG_SILU(gate[i]) * up[i];
        for (; i < seg_end; i++) {
            const float x = gate[i];
            y[i] = x / (1.0f + km_expf(-x)) * up[i];
        }
    }
}

#endif /* KM_SWIGLU_GGML_BODY_H */
