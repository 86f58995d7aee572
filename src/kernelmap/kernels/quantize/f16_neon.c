/* quantize/f16_neon.c — km_quantize_act_f16__neon: contract quantize_act.f16.v1.
 *
 * An instantiation of the family body quantize/convert_body.h (numerics there). Byte-identical to
 * km_quantize_act_f16__ref (and so to the x86 variants) for every (ith, nth), on the AArch64 AdvSIMD lanes.
 */
#include "km_lanes_neon.h"

#include "convert_body.h"

void km_quantize_act_f16__neon(void *y, const float *x, int64_t M, int64_t K, int ith, int nth) {
    kcv_convert(y, x, M, K, ith, nth, KCV_F16);
}
