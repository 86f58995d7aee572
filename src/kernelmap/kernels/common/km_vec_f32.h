/* km_vec_f32.h — the f32 vector lanes of the x86 variants of exact elementwise kernels (bias_add, moe_combine).
 *
 * Defines KV_LANES and the type kv_f32 with load/store/add/mul/set1: AVX-512 F (16 lanes) when the
 * including file is compiled with -mavx512f, else AVX (8 lanes; the avx2 variants). Every operation is one
 * IEEE f32 add or multiply per lane, rounded on its own, so a body written with these is bit-exact with a
 * scalar loop doing the same operations in the same order.
 */
#ifndef KM_VEC_F32_H
#define KM_VEC_F32_H

#include <immintrin.h>

#if defined(__AVX512F__)
#define KV_LANES 16
typedef __m512 kv_f32;
#define kv_load _mm512_loadu_ps
#define kv_store _mm512_storeu_ps
#define kv_add _mm512_add_ps
#define kv_mul _mm512_mul_ps
#define kv_set1 _mm512_set1_ps
#elif defined(__AVX__)
#define KV_LANES 8
typedef __m256 kv_f32;
#define kv_load _mm256_loadu_ps
#define kv_store _mm256_storeu_ps
#define kv_add _mm256_add_ps
#define kv_mul _mm256_mul_ps
#define kv_set1 _mm256_set1_ps
#else
#error "km_vec_f32.h needs -mavx2 or -mavx512f"
#endif

#endif /* KM_VEC_F32_H */
