"""Interleaved A/B timing of one linear kernel variant: a git revision's kernel sources against the working tree's.

On a shared machine the speed of a kernel moves by a third between two runs of `kernelmap bench` a minute apart,
which hides the 5-20% a schedule change is worth. This tool builds the variant twice (A: the sources of --rev,
extracted with `git archive`; B: the working tree), links both into one C timing program and calls them
alternately (A then B on even repetitions, B then A on odd ones, so a drift of the host or an order effect hits
both alike), each on its own copy of the weights, and prints the min and median GMAC/s of each and their ratios.
It also checks that both builds wrote the same output bytes (a schedule change must not change bits). Controls
with identical sources (--rev HEAD on a clean tree) gave ratios within 1-3% on a Zen 5 VM.

    .venv/bin/python benchmarks/ab_linear.py --provider linear_q6_k_q8_k_ggml --variant avx512vnni \\
        --shape 128x640x2048                      # M x N x K: a 128-row prefill GEMM, weights hot
    .venv/bin/python benchmarks/ab_linear.py --provider linear_q4_k_q8_k_ggml --variant avx2 \\
        --shape 1x2048x8192 --cold 64             # a decode GEMV over 64 weight copies (past the LLC)

Inputs are bytes below 0x3C (every f16 scale a small positive normal number, every code valid), the linear
token-major ABI (y, w, x, M, N, K, ith, nth), one thread (ith 0 of nth 1) or with --threads N a team whose
threads run their parts of each call between two barriers (the barrier cost is in both timings). Written by
hand: it is a few lines of C around the project's own compile flags, and no benchmarking library builds two
revisions of a C kernel into one process. Not a speed claim against llama.cpp (benchmarks/e2e.py and `kernelmap
bench` make those); a development tool. The weight copies are advised for 2 MiB pages (MADV_HUGEPAGE), as the
generated program advises its weights, so a cold GEMV here reads memory the way the model's does.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

MAIN_C = r"""
#define _DEFAULT_SOURCE
#include <pthread.h>
#include <sys/mman.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
void km_ab_a(float *, const void *, const void *, int64_t, int64_t, int64_t, int, int);
void km_ab_b(float *, const void *, const void *, int64_t, int64_t, int64_t, int, int);
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
static int cmp(const void *a, const void *b) { double x = *(const double *)a, y = *(const double *)b; return x < y ? -1 : x > y; }
typedef void (*lin_fn)(float *, const void *, const void *, int64_t, int64_t, int64_t, int, int);
/* a team of NTH threads: thread 0 publishes a call, all run their part (ith of NTH), all meet at a barrier */
static struct { lin_fn fn; float *y; const void *w, *x; int64_t M, N, K; int stop; } job;
static int NTH = 1;
static pthread_barrier_t bar;
static void *worker(void *arg) {
    const int ith = (int)(intptr_t)arg;
    for (;;) {
        pthread_barrier_wait(&bar);
        if (job.stop) return NULL;
        job.fn(job.y, job.w, job.x, job.M, job.N, job.K, ith, NTH);
        pthread_barrier_wait(&bar);
    }
}
static void call(lin_fn fn, float *y, const void *w, const void *x, int64_t M, int64_t N, int64_t K) {
    if (NTH == 1) { fn(y, w, x, M, N, K, 0, 1); return; }
    job.fn = fn; job.y = y; job.w = w; job.x = x; job.M = M; job.N = N; job.K = K;
    pthread_barrier_wait(&bar);
    fn(y, w, x, M, N, K, 0, NTH);
    pthread_barrier_wait(&bar);
}
int main(int argc, char **argv) {
    if (argc != 10) return 2;
    NTH = atoi(argv[9]);
    if (NTH < 1 || NTH > 64) return 2;
    if (NTH > 1) {
        pthread_barrier_init(&bar, NULL, (unsigned)NTH);
        for (int i = 1; i < NTH; i++) { pthread_t t; if (pthread_create(&t, NULL, worker, (void *)(intptr_t)i)) return 3; }
    }
    const int64_t M = atoll(argv[1]), N = atoll(argv[2]), K = atoll(argv[3]), wrow = atoll(argv[4]), xrow = atoll(argv[5]);
    const int reps = atoi(argv[6]), copies = atoi(argv[7]);
    const size_t wb = (size_t)N * (size_t)wrow, align = 64;
    /* the weights on 2 MiB pages where the kernel grants them, as the generated program advises its weights: on
     * 4 KiB pages the hardware prefetchers stop at every page and a GEMV from memory reads slower than the model */
    const size_t huge = (size_t)1 << 21, wsize = (wb * (size_t)copies + huge) / huge * huge;
    uint8_t *w = aligned_alloc(huge, wsize);
    if (w) (void)madvise(w, wsize, MADV_HUGEPAGE);
    uint8_t *x = aligned_alloc(align, ((size_t)(M * xrow) + align) / align * align);
    float *ya = aligned_alloc(align, ((size_t)(M * N) * 4 + align) / align * align);
    float *yb = aligned_alloc(align, ((size_t)(M * N) * 4 + align) / align * align);
    double *ta = malloc(sizeof(double) * (size_t)reps), *tb = malloc(sizeof(double) * (size_t)reps);
    if (!w || !x || !ya || !yb || !ta || !tb) return 3;
    srand((unsigned)atoi(argv[8]));
    for (size_t i = 0; i < wb * (size_t)copies; i++) w[i] = (uint8_t)(rand() % 0x3C);
    for (size_t i = 0; i < (size_t)(M * xrow); i++) x[i] = (uint8_t)(rand() % 0x3C);
    call(km_ab_a, ya, w, x, M, N, K);
    call(km_ab_b, yb, w, x, M, N, K);
    const int same = memcmp(ya, yb, (size_t)(M * N) * 4) == 0;
    for (int r = 0; r < reps; r++) {
        const uint8_t *wa = w + wb * (size_t)((2 * r) % copies), *wbb = w + wb * (size_t)((2 * r + 1) % copies);
        if (r & 1) {
            double t0 = now(); call(km_ab_b, yb, wbb, x, M, N, K); double t1 = now();
            call(km_ab_a, ya, wa, x, M, N, K); double t2 = now();
            tb[r] = t1 - t0; ta[r] = t2 - t1;
        } else {
            double t0 = now(); call(km_ab_a, ya, wa, x, M, N, K); double t1 = now();
            call(km_ab_b, yb, wbb, x, M, N, K); double t2 = now();
            ta[r] = t1 - t0; tb[r] = t2 - t1;
        }
    }
    qsort(ta, (size_t)reps, sizeof(double), cmp);
    qsort(tb, (size_t)reps, sizeof(double), cmp);
    const double macs = (double)M * (double)N * (double)K;
    printf("A (rev)  min %8.1f us  median %8.1f us  %7.1f GMAC/s (median)\n", ta[0] * 1e6, ta[reps / 2] * 1e6, macs / ta[reps / 2] / 1e9);
    printf("B (tree) min %8.1f us  median %8.1f us  %7.1f GMAC/s (median)\n", tb[0] * 1e6, tb[reps / 2] * 1e6, macs / tb[reps / 2] / 1e9);
    printf("B/A speed: median %.3f, min %.3f; same output bytes: %s\n", ta[reps / 2] / tb[reps / 2], ta[0] / tb[0], same ? "yes" : "NO");
    if (NTH > 1) { job.stop = 1; pthread_barrier_wait(&bar); }
    return same ? 0 : 1;
}
"""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 epilog="example: benchmarks/ab_linear.py --provider linear_q6_k_q8_k_ggml "
                                        "--variant avx512vnni --shape 128x640x2048",
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--provider", required=True, help="a linear provider id (linear.token_major.v1 ABI)")
    ap.add_argument("--variant", required=True, help="its variant, e.g. avx512vnni")
    ap.add_argument("--shape", required=True, help="MxNxK: activation rows, weight rows (outputs), K")
    ap.add_argument("--rev", default="HEAD", help="git revision of build A (default HEAD); B is the working tree")
    ap.add_argument("--reps", type=int, default=0, help="timed pairs (default: about 2 s of calls)")
    ap.add_argument("--cold", type=int, default=1, metavar="COPIES",
                    help="weight copies to rotate over (e.g. 64 for a GEMV from memory; 1: weights hot)")
    ap.add_argument("--threads", type=int, default=1,
                    help="threads of the team (each call: thread ith of N runs its part; default 1)")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)

    from kernelmap.build.driver import BASE_CFLAGS, compiler_for
    from kernelmap.circuits.hydrate import row_bytes
    from kernelmap.errors import KernelmapError
    from kernelmap.maps.registry import load_registry

    try:
        m, n, k = (int(v) for v in args.shape.lower().split("x"))
    except ValueError:
        print(f"error: --shape {args.shape!r}: expected MxNxK, e.g. 128x640x2048", file=sys.stderr)
        return 2
    try:
        provider = load_registry().providers[args.provider]
    except KeyError:
        print(f"error: --provider {args.provider!r}: no such provider", file=sys.stderr)
        return 2
    except KernelmapError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if provider.raw.get("interface") != "linear.token_major.v1":
        print(f"error: --provider {args.provider}: interface {provider.raw.get('interface')}, "
              "not linear.token_major.v1", file=sys.stderr)
        return 2
    try:
        variant = provider.variant(args.variant)
    except Exception:  # noqa: BLE001 - the registry's own error names the variants
        print(f"error: --variant {args.variant!r}: {args.provider} has "
              f"{', '.join(v.name for v in provider.variants)}", file=sys.stderr)
        return 2
    wrow = row_bytes(provider.raw["weights"][0]["dtype"], k)
    xrow = row_bytes(provider.raw["inputs"][0]["dtype"], k)
    need, avail = wrow * n * max(1, args.cold), _mem_available()
    if avail is not None and need > avail // 2:
        print(f"error: --cold {args.cold}: {max(1, args.cold)} copies of the {wrow * n / 1e6:.0f} MB weight need "
              f"{need / 1e9:.1f} GB, more than half of the {avail / 1e9:.1f} GB available (a weight above the LLC is "
              "cold with 1-2 copies)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="km_ab_") as tmp:
        t = Path(tmp)
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", args.rev, "src/kernelmap/kernels"],
                                 capture_output=True, check=False)
        if archive.returncode != 0:
            print(f"error: --rev {args.rev}: {archive.stderr.decode(errors='replace').strip()}", file=sys.stderr)
            return 1
        subprocess.run(["tar", "-x", "-C", str(t)], input=archive.stdout, check=True)
        cc = compiler_for(variant.cflags)
        objs = []
        for name, kroot in (("a", t / "src/kernelmap/kernels"), ("b", ROOT / "src/kernelmap/kernels")):
            src = kroot / variant.source
            if not src.is_file():
                print(f"error: {variant.source} does not exist in {'--rev ' + args.rev if name == 'a' else 'the tree'}",
                      file=sys.stderr)
                return 1
            obj = t / f"{name}.o"
            incs = [f"-I{d}" for d in (kroot / "common", src.parent)]
            cmd = [cc, *BASE_CFLAGS, *variant.cflags, *incs, f"-D{variant.symbol}=km_ab_{name}", "-c", str(src),
                   "-o", str(obj)]
            res = subprocess.run(cmd, capture_output=True, text=True, check=False)
            if res.returncode != 0:
                print(f"error: compiling {name.upper()} failed: {' '.join(cmd)}\n{res.stderr[-2000:]}", file=sys.stderr)
                return 1
            objs.append(str(obj))
        (t / "main.c").write_text(MAIN_C)
        exe = t / "ab"
        subprocess.run([cc, "-O2", "-std=c11", str(t / "main.c"), *objs, "-o", str(exe), "-lm", "-pthread"], check=True)
        reps = args.reps or max(20, min(5000, int(5e10 / max(1, m * n * k))))  # ~2 s at 50 GMAC/s
        print(f"{args.provider} [{args.variant}] M={m} N={n} K={k}: A = {args.rev}, B = working tree, {reps} pairs, "
              f"{args.cold} weight cop{'y' if args.cold == 1 else 'ies'}")
        sys.stdout.flush()
        return subprocess.run([str(exe), str(m), str(n), str(k), str(wrow), str(xrow), str(reps),
                               str(max(1, args.cold)), str(args.seed), str(args.threads)], check=False).returncode


def _mem_available() -> int | None:
    """MemAvailable from /proc/meminfo in bytes (None where there is no such file)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


if __name__ == "__main__":
    sys.exit(main())
