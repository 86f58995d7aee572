/* km_vexp.h — kernelmap's vector exp, written once against the lanes interface (km_lanes.h): the exp of
 * the swiglu family body (and of the attention bodies, which state the same sequence), so every ISA
 * computes it with the same IEEE operations and gives the same bits.
 *
 * Sequence (FMA used as written): x = min(89, x); lanes with x < -86.5 give +0.0; x = max(-86.5, x);
 * n = nearest-even(x * 1.44269504f); r = fma(-n, 0.693359375f, x); r = fma(-n, -2.12194440e-4f, r);
 * p = Horner-FMA polynomial (1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2,
 * 1.6666665459e-1, 5.0000001201e-1) in r; e = ((fma(p, r * r, r) + 1) * 2^(n - 1)) * 2.
 * Within 2 ulp of expf on [-86.5, 89].
 */
#ifndef KM_VEXP_H
#define KM_VEXP_H

#include "km_lanes.h"

KL_INLINE kl_fv kvx_exp(kl_fv x) {
    x = kl_fv_min(kl_fv_set1(89.0f), x);
    const kl_fvm small = kl_fv_cmp_lt(x, kl_fv_set1(-86.5f));
    x = kl_fv_max(kl_fv_set1(-86.5f), x);
    const kl_fv n = kl_fv_round(kl_fv_mul(x, kl_fv_set1(1.44269504088896341f)));
    kl_fv r = kl_fv_fnma(n, kl_fv_set1(0.693359375f), x);
    r = kl_fv_fnma(n, kl_fv_set1(-2.12194440e-4f), r);
    kl_fv p = kl_fv_set1(1.9875691500e-4f);
    p = kl_fv_fma(p, r, kl_fv_set1(1.3981999507e-3f));
    p = kl_fv_fma(p, r, kl_fv_set1(8.3334519073e-3f));
    p = kl_fv_fma(p, r, kl_fv_set1(4.1665795894e-2f));
    p = kl_fv_fma(p, r, kl_fv_set1(1.6666665459e-1f));
    p = kl_fv_fma(p, r, kl_fv_set1(5.0000001201e-1f));
    p = kl_fv_fma(p, kl_fv_mul(r, r), r);
    p = kl_fv_add(p, kl_fv_set1(1.0f));
    const kl_fv e = kl_fv_mul(kl_fv_mul(p, kl_fv_exp2i(kl_fv_sub(n, kl_fv_set1(1.0f)))), kl_fv_set1(2.0f));
    return kl_fv_blend(e, kl_fv_zero(), small);
}

#endif /* KM_VEXP_H */
