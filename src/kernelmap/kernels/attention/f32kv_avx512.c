/* attention/f32kv_avx512.c — km_attention_f32kv__avx512: AVX-512 F (+ FMA) variant of contract attention.f32kv.f32.v1.
 *
 * Op: causal GQA attention of q f32 [M, Hq*D] (row m at position p = pos + m) over the head-major
 * caches k_cache, v_cache f32 [Hkv][C][D]; output y f32 [M, Hq*D]. Query head h reads KV head
 * h / (Hq/Hkv). Row m sees keys j with j <= p and, when window > 0, p - j < window (llama.cpp's
 * LLAMA_SWA_TYPE_STANDARD mask: masked iff p - j >= n_swa). The caller guarantees pos + M <= C and
 * that keys 0 .. pos+M-1 are written. Constraints: D a multiple of 16, D <= 512, Hq a multiple of Hkv.
 * Numerics: exactly the order of attention/f32kv_ref.c (32 dot partials by i mod 32 with FMA, pairwise
 * fold, chunks of 32 keys, online softmax, L summed in key order, acc = fma(w, v, acc) in key order,
 * y = acc * (1/L)); the only difference from ref is the exp, a vector polynomial instead of expf:
 * Vector exp (identical op sequence in avx2 and avx512, FMA used as written): x = min(89, x);
 * lanes with x < -86.5 give +0.0; x = max(-86.5, x); n = nearest-even(x * 1.44269504f);
 * r = fma(-n, 0.693359375f, x); r = fma(-n, -2.12194440e-4f, r); p = Horner-FMA polynomial
 * (1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1,
 * 5.0000001201e-1) in r; e = (fma(p, r*r, r) + 1) * 2^(n-1) * 2. Within 2 ulp of expf on the range used.
 * avx2 and avx512 run the same op sequence per element, so they are byte-identical with each other.
 * Speed: the query heads of one KV head that fall in a thread's slice (up to 4 at a time) share
 * each K/V load. Partition: (row, head) items it = m*Hq + h, km_part over M*Hq.
 */
#include <immintrin.h>
#include <math.h>

#include "km_common.h"

typedef float km_kv_t;

static inline __m512 loadkv(const km_kv_t *p) { return _mm512_loadu_ps(p); }

#include "attention_avx512_body.h"

void km_attention_f32kv__avx512(float *y, const float *q, const void *k_cache, const void *v_cache,
        int64_t M, int64_t Hq, int64_t Hkv, int64_t D, int64_t C, int64_t pos, float scale,
        int64_t window, int ith, int nth) {
    km_attention_run(y, q, k_cache, v_cache, M, Hq, Hkv, D, C, pos, scale, window, ith, nth);
}
