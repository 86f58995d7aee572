/* harness.c — timing harness for `kernelmap bench`: a pthread team that runs one kernel call as
 * nth threads (ith = 0..nth-1, the calling thread is ith 0) and the machine's streaming-read kernel.
 *
 * Contract: km_bench_run(fn, slots, nslots, nsets, nth, reps, out) times `reps` team calls of
 * fn(set, ith, nth) after one warm-up call and writes each call's wall time in seconds to
 * out[0..reps-1]; call r uses argument set r % nsets (set k = slots + k * nslots), so rotating over
 * copies of the weights keeps them out of the caches as in a real decode step. A call is
 * timed from the release of the team until the last thread finishes. Workers spin (with pause and
 * sched_yield) between calls, so wake-up cost stays small next to microsecond kernels. Returns 0,
 * or -1 if a thread could not be created. No kernel math lives here.
 *
 * km_bench_stream_call(slots, ith, nth) is a kernel of the same shape that reads bytes
 * [lo, hi) of slots[0] (slots[1] bytes long, split in 64-byte lines by km_part) with 256-bit loads
 * when compiled with -mavx2, and stores a checksum in ((uint64_t *)slots[2])[ith * 8]. slots[3] (x86 with
 * AVX2) adds a software prefetch 8 KiB ahead of each line pair: 0 none, 1 to L2, 2 non-temporal (the hints
 * the decode GEMVs use; on Zen 5 the prefetched reads ran 10-20% faster than the plain loop, so a ceiling
 * measured without them understated what a kernel can stream).
 *
 * km_bench_peak_call(slots, ith, nth) is the int8 peak calibration: every thread runs slots[0]
 * iterations of KM_PEAK_CHAINS independent int8 multiply-add instructions of kind slots[1]
 * (1: vpmaddubsw ymm, 32 int8 products; 2: vpmaddubsw zmm, 64; 3: vpdpbusd zmm, 64 — the instruction
 * an ISA variant's integer dot is built on) and stores a checksum in ((uint64_t *)slots[2])[ith * 8].
 * Chains are independent so the loop runs at the instruction's issue rate, not its latency; the
 * caller divides the products by the wall time: a measured peak, whatever the CPU and its clock.
 * Kinds 4-6 are the lane steps of those instructions (4: avx2 ymm, 5: avx512bw zmm, 6: avx512vnni zmm): the
 * whole sequence the linear.*.ggml contracts need per int8 dot of one contract lane vector (see km_lane_avx2).
 * km_bench_peak_chains() returns KM_PEAK_CHAINS; km_bench_peak_steps(kind) the independent instructions or
 * lane steps per iteration of kind's loop. x86-64 only (other targets: kinds are no-ops).
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#include "km_common.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

typedef void (*km_bench_fn)(const uint64_t *slots, int ith, int nth);

struct km_team {
    km_bench_fn fn;
    const uint64_t *slots;
    int nth;
    atomic_long generation; /* bumped to release the workers for one call; -1 = exit */
    atomic_int done;        /* workers finished with the current generation */
};

struct km_worker {
    struct km_team *team;
    int ith;
};

static void km_relax(long spins) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
    if (spins > 256) sched_yield();
}

static void *km_worker_main(void *arg) {
    struct km_worker *w = (struct km_worker *)arg;
    struct km_team *team = w->team;
    long seen = 0;
    for (;;) {
        long gen;
        long spins = 0;
        while ((gen = atomic_load_explicit(&team->generation, memory_order_acquire)) == seen) {
            km_relax(++spins);
        }
        if (gen < 0) return NULL;
        seen = gen;
        team->fn(team->slots, w->ith, team->nth);
        atomic_fetch_add_explicit(&team->done, 1, memory_order_acq_rel);
    }
}

static double km_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void km_team_call(struct km_team *team, long gen) {
    atomic_store_explicit(&team->done, 0, memory_order_release);
    atomic_store_explicit(&team->generation, gen, memory_order_release);
    team->fn(team->slots, 0, team->nth);
    long spins = 0;
    while (atomic_load_explicit(&team->done, memory_order_acquire) < team->nth - 1) km_relax(++spins);
}

int km_bench_run(km_bench_fn fn, const uint64_t *slots, int nslots, int nsets, int nth, int reps,
                 double *out) {
    enum { KM_MAX_THREADS = 256 };
    if (nth < 1 || nth > KM_MAX_THREADS || reps < 1 || nslots < 1 || nsets < 1) return -1;
    struct km_team team;
    team.fn = fn;
    team.slots = slots;
    team.nth = nth;
    atomic_init(&team.generation, 0);
    atomic_init(&team.done, 0);
    pthread_t threads[KM_MAX_THREADS];
    struct km_worker workers[KM_MAX_THREADS];
    int started = 0;
    int status = 0;
    for (int i = 1; i < nth; i++) {
        workers[i].team = &team;
        workers[i].ith = i;
        if (pthread_create(&threads[i], NULL, km_worker_main, &workers[i]) != 0) {
            status = -1;
            break;
        }
        started++;
    }
    if (status == 0) {
        long gen = 0;
        km_team_call(&team, ++gen); /* warm-up: page faults, caches, thread start */
        for (int r = 0; r < reps; r++) {
            team.slots = slots + (size_t)(r % nsets) * (size_t)nslots;
            double t0 = km_now();
            km_team_call(&team, ++gen);
            out[r] = km_now() - t0;
        }
    }
    atomic_store_explicit(&team.generation, -1, memory_order_release);
    for (int i = 1; i <= started; i++) pthread_join(threads[i], NULL);
    return status;
}

void km_bench_stream_call(const uint64_t *slots, int ith, int nth) {
    const uint8_t *buf = (const uint8_t *)(uintptr_t)slots[0];
    int64_t lines = (int64_t)slots[1] / 64;
    uint64_t *sink = (uint64_t *)(uintptr_t)slots[2];
    int64_t lo, hi;
    km_part(lines, ith, nth, &lo, &hi);
    uint64_t sum = 0;
#if defined(__AVX2__)
    __m256i a0 = _mm256_setzero_si256(), a1 = _mm256_setzero_si256();
    __m256i a2 = _mm256_setzero_si256(), a3 = _mm256_setzero_si256();
    const uint64_t pf = slots[3];
    int64_t i = lo;
    for (; i + 2 <= hi; i += 2) {
        const uint8_t *p = buf + i * 64;
        if (pf == 1) _mm_prefetch((const char *)(p + 8192), _MM_HINT_T1);
        else if (pf == 2) _mm_prefetch((const char *)(p + 8192), _MM_HINT_NTA);
        a0 = _mm256_xor_si256(a0, _mm256_loadu_si256((const __m256i *)(const void *)p));
        a1 = _mm256_xor_si256(a1, _mm256_loadu_si256((const __m256i *)(const void *)(p + 32)));
        a2 = _mm256_xor_si256(a2, _mm256_loadu_si256((const __m256i *)(const void *)(p + 64)));
        a3 = _mm256_xor_si256(a3, _mm256_loadu_si256((const __m256i *)(const void *)(p + 96)));
    }
    for (; i < hi; i++) {
        const uint8_t *p = buf + i * 64;
        a0 = _mm256_xor_si256(a0, _mm256_loadu_si256((const __m256i *)(const void *)p));
        a1 = _mm256_xor_si256(a1, _mm256_loadu_si256((const __m256i *)(const void *)(p + 32)));
    }
    __m256i a = _mm256_xor_si256(_mm256_xor_si256(a0, a1), _mm256_xor_si256(a2, a3));
    uint64_t lanes[4];
    _mm256_storeu_si256((__m256i *)(void *)lanes, a);
    sum = lanes[0] ^ lanes[1] ^ lanes[2] ^ lanes[3];
#else
    for (int64_t i = lo * 8; i < hi * 8; i++) {
        uint64_t v;
        memcpy(&v, buf + i * 8, 8);
        sum ^= v;
    }
#endif
    sink[ith * 8] = sum;
}

enum { KM_PEAK_CHAINS = 12 };

int km_bench_peak_chains(void) { return KM_PEAK_CHAINS; }

#if defined(__x86_64__)
/* Twelve independent chains of one instruction, in asm (the compiler copied and spilled intrinsic chains). */
#define KM_PEAK_ASM(INS)                                                                                   \
    __asm__ volatile(INS " %[b], %[c], %[a0]\n\t" INS " %[b], %[c], %[a1]\n\t" INS " %[b], %[c], %[a2]\n\t"   \
                     INS " %[b], %[c], %[a3]\n\t" INS " %[b], %[c], %[a4]\n\t" INS " %[b], %[c], %[a5]\n\t"   \
                     INS " %[b], %[c], %[a6]\n\t" INS " %[b], %[c], %[a7]\n\t" INS " %[b], %[c], %[a8]\n\t"   \
                     INS " %[b], %[c], %[a9]\n\t" INS " %[b], %[c], %[a10]\n\t" INS " %[b], %[c], %[a11]"      \
                     : [a0] "+v"(a0), [a1] "+v"(a1), [a2] "+v"(a2), [a3] "+v"(a3), [a4] "+v"(a4), [a5] "+v"(a5), \
                       [a6] "+v"(a6), [a7] "+v"(a7), [a8] "+v"(a8), [a9] "+v"(a9), [a10] "+v"(a10),           \
                       [a11] "+v"(a11)                                                                    \
                     : [b] "v"(b), [c] "v"(c))
#define KM_PEAK_BODY(T, ZERO, XOR, LOW, INS)                                                          \
    T a0 = ZERO, a1 = ZERO, a2 = ZERO, a3 = ZERO, a4 = ZERO, a5 = ZERO, a6 = ZERO, a7 = ZERO;          \
    T a8 = ZERO, a9 = ZERO, a10 = ZERO, a11 = ZERO;                                                  \
    for (int64_t i = 0; i < iters; i++) KM_PEAK_ASM(INS);                                            \
    const T s = XOR(XOR(XOR(XOR(a0, a1), XOR(a2, a3)), XOR(XOR(a4, a5), XOR(a6, a7))),                \
                    XOR(XOR(a8, a9), XOR(a10, a11)));                                                \
    return (uint64_t)LOW(s)

#define KM_LOW256(v) _mm256_extract_epi64(v, 0)
#define KM_LOW512(v) _mm_cvtsi128_si64(_mm512_castsi512_si128(v))

/* kind 1: vpmaddubsw ymm (32 int8 products each) */
__attribute__((target("avx2"))) static uint64_t km_peak_avx2(int64_t iters) {
    const __m256i b = _mm256_set1_epi8(3), c = _mm256_set1_epi8(5);
    KM_PEAK_BODY(__m256i, _mm256_setzero_si256(), _mm256_xor_si256, KM_LOW256, "vpmaddubsw");
}

/* kind 2: vpmaddubsw zmm (64) */
__attribute__((target("avx512f,avx512bw"))) static uint64_t km_peak_avx512bw(int64_t iters) {
    const __m512i b = _mm512_set1_epi8(3), c = _mm512_set1_epi8(5);
    KM_PEAK_BODY(__m512i, _mm512_setzero_si512(), _mm512_xor_si512, KM_LOW512, "vpmaddubsw");
}

/* kind 3: vpdpbusd zmm (64) */
__attribute__((target("avx512f,avx512bw,avx512vnni"))) static uint64_t km_peak_avx512vnni(int64_t iters) {
    const __m512i b = _mm512_set1_epi8(3), c = _mm512_set1_epi8(5);
    KM_PEAK_BODY(__m512i, _mm512_setzero_si512(), _mm512_xor_si512, KM_LOW512, "vpdpbusd");
}

/* The lane-step kinds: the instructions the linear.*.ggml contracts need per int8 dot of one contract lane
 * vector (4 products per int32 lane), in asm, steps independent (each its own accumulator): the dot into an
 * exact int32 (with its seed), the seed's magic removed (the lane as f32, exact) and the block's fma. That is
 * the float order's floor: a GEMM cannot run faster per product than this sequence, whatever its blocking.
 * The constants keep every value small and normal (lane = 4.0, t = 2^-20). */
#define KM_LANE_CONSTS(T, SET8, SET16, SET32, SETF)                                                       \
    const T b = SET8(1), c = SET8(1), one = SET16(1), seed = SET32(0x4B400000);                            \
    const T mg = (T)SETF(-12582912.0f), tv = (T)SETF(0x1p-20f)
#define KM_LANE_OUT(A, N) [t##N] "=&v"(t##N), [a##N] "+v"(A##N)
#define KM_LANE_IN [b] "v"(b), [c] "v"(c), [one] "v"(one), [seed] "v"(seed), [mg] "v"(mg), [tv] "v"(tv)
/* vpmaddubsw + vpmaddwd + vpaddd (seed) + vaddps (magic) + vfmadd231ps: kinds 4 (ymm) and 5 (zmm) */
#define KM_LANE_MADD(N)                                                                                   \
    "vpmaddubsw %[c], %[b], %[t" #N "]\n\t"                                                                \
    "vpmaddwd %[one], %[t" #N "], %[t" #N "]\n\t"                                                          \
    "vpaddd %[seed], %[t" #N "], %[t" #N "]\n\t"                                                           \
    "vaddps %[mg], %[t" #N "], %[t" #N "]\n\t"                                                             \
    "vfmadd231ps %[tv], %[t" #N "], %[a" #N "]\n\t"
/* vmovdqa64 (the seed) + vpdpbusd + vaddps (magic) + vfmadd231ps: kind 6 */
#define KM_LANE_VNNI(N)                                                                                   \
    "vmovdqa64 %[seed], %[t" #N "]\n\t"                                                                    \
    "vpdpbusd %[c], %[b], %[t" #N "]\n\t"                                                                  \
    "vaddps %[mg], %[t" #N "], %[t" #N "]\n\t"                                                             \
    "vfmadd231ps %[tv], %[t" #N "], %[a" #N "]\n\t"

/* kind 4: the AVX2 lane step, 4 independent steps per iteration (16 ymm registers: 8 + 6 constants) */
__attribute__((target("avx2,fma"))) static uint64_t km_lane_avx2(int64_t iters) {
    KM_LANE_CONSTS(__m256i, _mm256_set1_epi8, _mm256_set1_epi16, _mm256_set1_epi32, _mm256_set1_ps);
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    __m256i t0, t1, t2, t3;
    for (int64_t i = 0; i < iters; i++)
        __asm__ volatile(KM_LANE_MADD(0) KM_LANE_MADD(1) KM_LANE_MADD(2) KM_LANE_MADD(3)
                         : KM_LANE_OUT(a, 0), KM_LANE_OUT(a, 1), KM_LANE_OUT(a, 2), KM_LANE_OUT(a, 3)
                         : KM_LANE_IN);
    const __m256 s = _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3));
    return (uint64_t)_mm256_extract_epi64(_mm256_castps_si256(s), 0);
}

#define KM_LANE_ZMM_BODY(STEP)                                                                            \
    KM_LANE_CONSTS(__m512i, _mm512_set1_epi8, _mm512_set1_epi16, _mm512_set1_epi32, _mm512_set1_ps);       \
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;        \
    __m512i t0, t1, t2, t3, t4, t5, t6, t7;                                                               \
    for (int64_t i = 0; i < iters; i++)                                                                   \
        __asm__ volatile(STEP(0) STEP(1) STEP(2) STEP(3) STEP(4) STEP(5) STEP(6) STEP(7)                  \
                         : KM_LANE_OUT(a, 0), KM_LANE_OUT(a, 1), KM_LANE_OUT(a, 2), KM_LANE_OUT(a, 3),     \
                           KM_LANE_OUT(a, 4), KM_LANE_OUT(a, 5), KM_LANE_OUT(a, 6), KM_LANE_OUT(a, 7)      \
                         : KM_LANE_IN);                                                                    \
    const __m512 s = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)),           \
                                   _mm512_add_ps(_mm512_add_ps(a4, a5), _mm512_add_ps(a6, a7)));          \
    return (uint64_t)_mm_cvtsi128_si64(_mm512_castsi512_si128(_mm512_castps_si512(s)))

/* kind 5: the AVX-512 (BW) lane step in zmm, 8 independent steps per iteration */
__attribute__((target("avx512f,avx512bw"))) static uint64_t km_lane_avx512bw(int64_t iters) {
    KM_LANE_ZMM_BODY(KM_LANE_MADD);
}

/* kind 6: the AVX-512 VNNI lane step, 8 independent steps per iteration */
__attribute__((target("avx512f,avx512bw,avx512vnni"))) static uint64_t km_lane_avx512vnni(int64_t iters) {
    KM_LANE_ZMM_BODY(KM_LANE_VNNI);
}
#undef KM_LANE_ZMM_BODY
#undef KM_LANE_VNNI
#undef KM_LANE_MADD
#undef KM_LANE_IN
#undef KM_LANE_OUT
#undef KM_LANE_CONSTS
#undef KM_PEAK_BODY
#undef KM_LOW256
#undef KM_LOW512
#undef KM_PEAK_ASM
#endif

/* Independent instructions (kinds 1-3) or lane steps (4-6) per iteration of kind's loop. */
int km_bench_peak_steps(int kind) { return kind == 4 ? 4 : kind >= 5 && kind <= 6 ? 8 : KM_PEAK_CHAINS; }

void km_bench_peak_call(const uint64_t *slots, int ith, int nth) {
    (void)nth;
    const int64_t iters = (int64_t)slots[0];
    uint64_t sum = 0;
#if defined(__x86_64__)
    switch ((int)slots[1]) {
    case 1: sum = km_peak_avx2(iters); break;
    case 2: sum = km_peak_avx512bw(iters); break;
    case 3: sum = km_peak_avx512vnni(iters); break;
    case 4: sum = km_lane_avx2(iters); break;
    case 5: sum = km_lane_avx512bw(iters); break;
    case 6: sum = km_lane_avx512vnni(iters); break;
    default: break;
    }
#else
    (void)iters;
#endif
    ((uint64_t *)(uintptr_t)slots[2])[ith * 8] = sum;
}
