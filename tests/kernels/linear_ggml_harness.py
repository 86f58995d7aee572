"""Shared loops of the linear kernel tests (interface linear.token_major.v1: fn(y, w, x, M, N, K, ith, nth)).

Used by test_linear_q4_k_ggml.py, test_linear_q6_k_ggml.py and test_linear_q32_ggml.py: random weight
blocks, q8_K activation packing, a guarded run on misaligned copies of w and x over a thread
partition, and the comparisons every such test repeats (SIMD variants == ref bit for bit, ref == an
oracle, ref independent of (ith, nth) and of the other rows, real weight rows of the model).
Each test module still owns its oracle, shapes, cases and seeds; nothing here decides what a kernel
should compute.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from kernel_harness import assert_close_or_equal, bind, guarded, ptr, run_partitioned, runnable_variants

from kernelmap.reference import ops

QK_K = 256
Q8_K_DTYPE = np.dtype([("d", "<f4"), ("qs", "i1", (QK_K,)), ("bsums", "<i2", (QK_K // 16,))])

# the hypothesis settings and the seed / weight scale / activation scale strategies of the random-shape
# tests (each test keeps its own ranges of M, N, blocks and nth)
RANDOM_SHAPE_SETTINGS = settings(max_examples=25, deadline=None,
                                 suppress_health_check=[HealthCheck.function_scoped_fixture])
RANDOM_SCALES = {"seed": st.integers(0, 2**32 - 1), "wscale": st.sampled_from([1e-6, 1e-2, 3.0, 6e4]),
                 "xscale": st.sampled_from([1e-20, 1.0, 1e20])}

# (name, M, N, K, w uint8 [N, row bytes], x activation blocks [M, K / block])
Case = tuple[str, int, int, int, np.ndarray, np.ndarray]
Runner = Callable[..., np.ndarray]


def random_blocks(n: int, nb: int, block: int, rng: np.random.Generator, *, scale: float,
                  d_offsets: Sequence[int], signed: bool) -> np.ndarray:
    """Random weight blocks uint8 [n, nb * block]: every byte random, then a finite f16 of magnitude
    ~scale (both signs when `signed`) at each of `d_offsets` (the block's d, dmin) of every block."""
    raw = rng.integers(0, 256, size=(n, nb, block), dtype=np.uint8)
    for off in d_offsets:
        d = rng.uniform(0.1, 1.0, size=(n, nb)) * scale
        if signed:
            d = d * np.where(rng.random((n, nb)) < 0.5, -1, 1)
        raw[:, :, off:off + 2] = d.astype(np.float16).view(np.uint8).reshape(n, nb, 2)
    return raw.reshape(n, nb * block)


def pack_q8_k(xf: np.ndarray) -> np.ndarray:
    """xf f32 [M, K] -> q8_k blocks [M, K/256] from kernelmap.reference.ops.quantize_q8_k (the NumPy
    oracles' own quantizer, which matches llama.cpp's)."""
    q = ops.quantize_q8_k(xf)
    m, k = xf.shape
    out = np.zeros((m, k // QK_K), dtype=Q8_K_DTYPE)
    out["d"] = q.d.reshape(m, -1)
    out["qs"] = q.qs.reshape(m, -1, QK_K)
    out["bsums"] = q.bsums.reshape(m, -1, 16)
    return out


def misaligned(a: np.ndarray, offset: int) -> np.ndarray:
    """A copy of `a`'s bytes starting at an address that is `offset` mod 64 (no alignment assumed)."""
    raw = np.ascontiguousarray(a).view(np.uint8).reshape(-1)
    buf = np.empty(raw.size + 128, dtype=np.uint8)
    start = (offset - buf.ctypes.data) % 64
    out = buf[start:start + raw.size]
    out[:] = raw
    return out


def run_linear(fn, w: np.ndarray, x: np.ndarray, m: int, n: int, k: int, nth: int, threaded: bool = False, *,
               w_offset: int, x_offset: int) -> np.ndarray:
    """y f32 [m, n] of fn called for every ith < nth (in threads when `threaded`), with w and x copied to
    addresses w_offset / x_offset mod 64 and y canary-guarded (a write outside y raises)."""
    y, check = guarded((m, n), np.float32)
    wm, xm = misaligned(w, w_offset), misaligned(x, x_offset)  # keep the buffers alive across the calls
    run_partitioned(fn, (ptr(y), ptr(wm), ptr(xm), m, n, k), nth, threaded=threaded)
    check()
    return y.copy()


def runner(w_offset: int, x_offset: int) -> Runner:
    """run_linear with the module's buffer offsets fixed: run(fn, w, x, m, n, k, nth, threaded=False)."""
    return functools.partial(run_linear, w_offset=w_offset, x_offset=x_offset)


def simd_variants(spec: dict[str, Any]) -> list[str]:
    """The map's non-ref variants (from the registry) this host can run, in file order; the others are
    noted for the end-of-run ISA line."""
    return runnable_variants(spec["id"], ref=False)


def assert_variants_match_ref(lib, spec: dict[str, Any], run: Runner, cases: Iterable[Case], variants: Sequence[str],
                              nths: Sequence[int] = (1, 2, 3), threaded_nth: int | None = 2) -> None:
    """For every case: the ref at nth = 1, then each variant at each nth (in threads at threaded_nth),
    bit for bit equal to it."""
    ref = bind(lib, spec, "ref")
    fns = {v: bind(lib, spec, v) for v in variants}
    for name, m, n, k, w, x in cases:
        want = run(ref, w, x, m, n, k, 1)
        for variant, fn in fns.items():
            for nth in nths:
                got = run(fn, w, x, m, n, k, nth, threaded=nth == threaded_nth)
                assert_close_or_equal(want, got, map_id=spec["id"], variant=variant,
                                      context=f"case={name} M={m} N={n} K={k} nth={nth}")


def assert_ref_matches(lib, spec: dict[str, Any], run: Runner, want: np.ndarray, w: np.ndarray, x: np.ndarray,
                       m: int, n: int, k: int, *, nth: int, context: str, variants: Sequence[str] = ()) -> None:
    """The ref (split over nth) equals `want` (an oracle's output) bit for bit; then each of `variants`
    (at nth = 1) equals the ref."""
    got = run(bind(lib, spec, "ref"), w, x, m, n, k, nth)
    assert_close_or_equal(want, got, map_id=spec["id"], variant="ref", context=context)
    for variant in variants:
        assert_close_or_equal(got, run(bind(lib, spec, variant), w, x, m, n, k, 1), map_id=spec["id"],
                              variant=variant, context=context)


def assert_partition_invariant(lib, spec: dict[str, Any], run: Runner, w: np.ndarray, x: np.ndarray, m: int, n: int,
                               k: int, nths: Sequence[int]) -> np.ndarray:
    """The ref gives the same bits for every nth as for nth = 1; returns the nth = 1 output."""
    ref = bind(lib, spec, "ref")
    want = run(ref, w, x, m, n, k, 1)
    for nth in nths:
        assert_close_or_equal(want, run(ref, w, x, m, n, k, nth), map_id=spec["id"], variant="ref",
                              context=f"nth={nth}")
    return want


def assert_rows_independent(lib, spec: dict[str, Any], run: Runner, variant: str, w: np.ndarray, x: np.ndarray,
                            m: int, n: int, k: int, *, nth: int, whole: np.ndarray | None = None) -> None:
    """Each activation row computed alone (M = 1, split over nth) gives the bits of the whole run's row
    (`whole`, else the variant's own run over all M rows at nth = 1)."""
    fn = bind(lib, spec, variant)
    if whole is None:
        whole = run(fn, w, x, m, n, k, 1)
    for r in range(m):
        row = run(fn, w, np.ascontiguousarray(x[r:r + 1]), 1, n, k, nth)
        assert_close_or_equal(whole[r:r + 1], row, map_id=spec["id"], variant=variant, context=f"row {r} alone")


def model_tensors(path: str | os.PathLike[str], type_name: str) -> list[tuple[str, int, np.ndarray]]:
    """[(name, K, rows uint8 [N, row bytes])] of the first and the last tensor of ggml type `type_name`
    in the GGUF at `path` (the caller skips when the file is absent); fails if there is none."""
    from kernelmap.gguf import open_gguf

    f = open_gguf(path)
    names = [t.name for t in f.tensors.values() if t.type_name.lower() == type_name]
    assert names, f"the model has no {type_name} tensor"
    out = []
    for name in (names[0], names[-1]):
        info = f.tensors[name]
        k, n_all = int(info.shape[0]), int(info.shape[1])
        out.append((name, k, np.asarray(f.tensor_data(name)).reshape(n_all, -1)))
    return out
