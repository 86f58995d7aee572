/* km_runtime.c — persistent thread pool and barrier for generated models (see km_runtime.h).
 *
 * The barrier is a counter plus a generation number: the last thread to arrive resets the counter
 * and bumps the generation; the others spin (with a pause hint, then sched_yield) until the
 * generation changes. Jobs are published the same way through job_gen.
 */
#define _GNU_SOURCE
#include "km_runtime.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define KM_PAUSE() _mm_pause()
#else
#define KM_PAUSE() ((void)0)
#endif

#define KM_SPIN_BEFORE_YIELD 2048
/* An idle worker yields for at most this long before sleeping: long enough to catch the next op of a
 * decode loop (the host samples between tokens), short enough that an idle pool never competes with
 * other work on the machine. */
#define KM_IDLE_SECONDS 0.002

struct km_pool {
    int nth;
    pthread_t *threads;
    km_task_fn fn;
    void *arg;
    atomic_int job_gen;
    atomic_int done;
    atomic_int stop;
    atomic_int bar_count;
    atomic_int bar_gen;
    pthread_mutex_t mu;
    pthread_cond_t cv;
};

typedef struct {
    km_pool *pool;
    int ith;
} km_worker_arg;

double km_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void km_pool_barrier(km_pool *pool) {
    if (pool->nth == 1) return;
    int gen = atomic_load(&pool->bar_gen);
    if (atomic_fetch_add(&pool->bar_count, 1) == pool->nth - 1) {
        atomic_store(&pool->bar_count, 0);
        atomic_fetch_add(&pool->bar_gen, 1);
        return;
    }
    long spins = 0;
    while (atomic_load(&pool->bar_gen) == gen) {
        if (++spins < KM_SPIN_BEFORE_YIELD) KM_PAUSE();
        else sched_yield();
    }
}

static void *km_worker(void *p) {
    km_worker_arg *wa = (km_worker_arg *)p;
    km_pool *pool = wa->pool;
    int ith = wa->ith;
    free(wa);
    int seen = 0;
    for (;;) {
        long spins = 0;
        double idle_since = 0.0;
        while (atomic_load(&pool->job_gen) == seen) {
            if (++spins < KM_SPIN_BEFORE_YIELD) {
                KM_PAUSE();
            } else if (spins == KM_SPIN_BEFORE_YIELD) {
                idle_since = km_now();
            } else if (km_now() - idle_since < KM_IDLE_SECONDS) {
                sched_yield();
            } else {
                pthread_mutex_lock(&pool->mu);
                while (atomic_load(&pool->job_gen) == seen) pthread_cond_wait(&pool->cv, &pool->mu);
                pthread_mutex_unlock(&pool->mu);
            }
        }
        seen = atomic_load(&pool->job_gen);
        if (atomic_load(&pool->stop)) return NULL;
        pool->fn(pool->arg, ith, pool->nth);
        atomic_fetch_add(&pool->done, 1);
    }
}

km_pool *km_pool_create(int nth) {
    if (nth < 1) nth = 1;
    km_pool *pool = calloc(1, sizeof *pool);
    if (!pool) return NULL;
    pool->nth = nth;
    pthread_mutex_init(&pool->mu, NULL);
    pthread_cond_init(&pool->cv, NULL);
    pool->threads = calloc((size_t)nth, sizeof(pthread_t));
    if (!pool->threads) {
        free(pool);
        return NULL;
    }
    for (int i = 1; i < nth; i++) {
        km_worker_arg *wa = malloc(sizeof *wa);
        if (!wa) {
            pool->nth = i;
            km_pool_destroy(pool);
            return NULL;
        }
        wa->pool = pool;
        wa->ith = i;
        if (pthread_create(&pool->threads[i], NULL, km_worker, wa) != 0) {
            free(wa);
            pool->nth = i;
            km_pool_destroy(pool);
            return NULL;
        }
    }
    return pool;
}

int km_pool_size(const km_pool *pool) { return pool->nth; }

static void km_publish(km_pool *pool) {
    pthread_mutex_lock(&pool->mu);
    atomic_fetch_add(&pool->job_gen, 1);
    pthread_cond_broadcast(&pool->cv);
    pthread_mutex_unlock(&pool->mu);
}

void km_pool_run(km_pool *pool, km_task_fn fn, void *arg) {
    if (pool->nth == 1) {
        fn(arg, 0, 1);
        return;
    }
    pool->fn = fn;
    pool->arg = arg;
    atomic_store(&pool->done, 0);
    km_publish(pool);
    fn(arg, 0, pool->nth);
    long spins = 0;
    while (atomic_load(&pool->done) != pool->nth - 1) {
        if (++spins < KM_SPIN_BEFORE_YIELD) KM_PAUSE();
        else sched_yield();
    }
}

void km_pool_destroy(km_pool *pool) {
    if (!pool) return;
    atomic_store(&pool->stop, 1);
    km_publish(pool);
    for (int i = 1; i < pool->nth; i++) pthread_join(pool->threads[i], NULL);
    pthread_mutex_destroy(&pool->mu);
    pthread_cond_destroy(&pool->cv);
    free(pool->threads);
    free(pool);
}
