/* attention/f16kv_neon.c — km_attention_f16kv__neon: contract attention.f16kv.f32.v1.
 *
 * An instantiation of the family body attention/attention_online_body.h on the
 * AArch64 AdvSIMD lanes (4-lane q registers):
 * within the map's rtol/atol of km_attention_f16kv__ref (the body's vector exp against libm expf) and
 * byte-identical to the other ISAs' instantiations for every (ith, nth). Up to 2 query heads of one KV
 * head share each K/V load.
 */
#include "km_lanes_neon.h"
#define KATT_KV_F16 1
#define KATT_GMAX 2
#include "attention_online_body.h"

void km_attention_f16kv__neon(float *y, const float *q, const void *k_cache, const void *v_cache, int64_t M, int64_t Hq,
        int64_t Hkv, int64_t D, int64_t C, int64_t pos, float scale, int64_t window, int ith, int nth) {
    katt_run(y, q, k_cache, v_cache, M, Hq, Hkv, D, C, pos, scale, window, ith, nth);
}
