/* km_runtime.h — the runtime support every generated model links: a persistent thread pool with a
 * barrier, and per-op profiling counters.
 *
 * Contract: km_pool_run(pool, fn, arg) runs fn(arg, ith, nth) on every thread of the pool (the caller
 * is thread 0) and returns when all have finished. Inside fn, km_pool_barrier(pool) separates
 * dependent steps: no thread passes it until every thread has reached it. Workers spin briefly
 * between jobs, yield for at most 2 ms, then sleep on a condition variable, so an idle pool costs no CPU.
 */
#ifndef KM_RUNTIME_H
#define KM_RUNTIME_H

#include <stdint.h>

typedef struct km_pool km_pool;
typedef void (*km_task_fn)(void *arg, int ith, int nth);

km_pool *km_pool_create(int nth);
void km_pool_destroy(km_pool *pool);
int km_pool_size(const km_pool *pool);
void km_pool_run(km_pool *pool, km_task_fn fn, void *arg);
void km_pool_barrier(km_pool *pool);

/* Monotonic time in seconds. */
double km_now(void);

#endif /* KM_RUNTIME_H */
