"""Shared harness for the kernel differential tests: build a map's library, bind its symbols, guard buffers.

Input: a map id (the JSON under src/kernelmap/kernel_maps/) -> a compiled ctypes library with
argtypes taken from the map's call_abi, host-feature checks, canary-guarded NumPy buffers and a
comparison that prints the first mismatches. It does not decide what a kernel should compute; each
test module owns its oracle.

Which variants a test runs comes from the loaded registry (`map_variants`, `runnable_variants`), never
from a hand-written list, so a variant added to a map is tested the day it is added; every map id
enumerated here is recorded for tests/kernels/test_variant_coverage.py. A variant the host cannot run
is skipped with its missing features named and listed in the run's end-of-session ISA line
(tests/support/isa_report.py). A variant whose source file is missing is a failure, never a skip.

Use from any test module: `from kernel_harness import load_map_library, ...` (tests/conftest.py puts
tests/kernels on sys.path).
"""

from __future__ import annotations

import ctypes
import functools
import json
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest
from isa_report import note_unchecked

from kernelmap.build.driver import KERNEL_ROOT, CompileUnit, build_shared
from kernelmap.isa_flags import flags_arch

__all__ = [
    "MAPS_DIR",
    "CANARY",
    "load_map",
    "load_map_library",
    "map_variants",
    "runnable_variants",
    "skip_unless_runnable",
    "registry",
    "ENUMERATED",
    "variant_symbols",
    "host_features",
    "host_can_run",
    "bind",
    "ptr",
    "guarded",
    "run_partitioned",
    "assert_close_or_equal",
    "gguf_layout",
]

MAPS_DIR = KERNEL_ROOT.parent / "kernel_maps"
CANARY = 64  # guard bytes before and after every guarded buffer
_CANARY_BYTE = 0xA5
_ALIGN = 64

_RUNTIME_TYPES = {"ith": ctypes.c_int, "nth": ctypes.c_int}
_PARAM_TYPES = {
    "float": ctypes.c_float, "f32": ctypes.c_float,
    "double": ctypes.c_double, "f64": ctypes.c_double,
    "int": ctypes.c_int, "int32": ctypes.c_int32, "i32": ctypes.c_int32,
    "int64": ctypes.c_int64, "i64": ctypes.c_int64, "int64_t": ctypes.c_int64,
    "bool": ctypes.c_int,
}
_POINTER_SOURCES = ("output", "activation", "weight", "weight_opt", "state", "scratch")


def load_map(map_id: str) -> dict[str, Any]:
    """Read kernel_maps/<map_id>.json as a plain dict (no schema validation here)."""
    path = MAPS_DIR / f"{map_id}.json"
    with open(path, encoding="utf-8") as fh:
        data = json.load(fh)
    if data.get("id") != map_id:
        raise AssertionError(f"{path}: /id: map id {data.get('id')!r} does not equal the file stem {map_id!r}")
    return data


def variant_symbols(map_id: str) -> list[dict[str, Any]]:
    """The map's variants as dicts {name, symbol, source, requires, cflags, priority}, in file order."""
    return [dict(v) for v in load_map(map_id)["variants"]]


@functools.cache
def registry() -> Any:
    """The built-in kernel-map registry (validated by kernelmap.maps.registry.load_registry)."""
    from kernelmap.maps.registry import load_registry

    return load_registry()


# (map id, variant) pairs some test module enumerated through map_variants / runnable_variants
ENUMERATED: set[tuple[str, str]] = set()


def map_variants(map_id: str, *, ref: bool = True) -> list[str]:
    """The variant names `map_id` declares in the registry, in file order (without "ref" if ref=False).

    Parametrize differential tests over this (never over a hand-written list); the pairs are recorded
    in ENUMERATED so the coverage test sees which maps have a differential test.
    """
    providers = registry().providers
    if map_id not in providers:
        raise AssertionError(f"no kernel map {map_id!r} in the registry (have {len(providers)} maps)")
    names = [v.name for v in providers[map_id].variants]
    ENUMERATED.update((map_id, n) for n in names)
    return names if ref else [n for n in names if n != "ref"]


def _missing(map_id: str, variant: str) -> list[str]:
    want = registry().providers[map_id].variant(variant).requires
    return sorted(set(want) - host_features())


def _other_arch(map_id: str, variant: str) -> bool:
    """A variant compiled for another architecture (tests/aarch64 runs those under qemu, not this suite)."""
    from kernelmap.isa_flags import flags_arch

    arch = flags_arch(registry().providers[map_id].variant(variant).cflags)
    return arch not in (None, host_arch())


def skip_unless_runnable(map_id: str, variant: str) -> None:
    """pytest.skip("<map> [<variant>]: host lacks <features>") when the target cannot run the variant;
    the skip is noted for the end-of-run ISA summary line (not for another architecture's variants,
    which the aarch64 suite checks under emulation)."""
    if _other_arch(map_id, variant):
        pytest.skip(f"{map_id} [{variant}]: another architecture's variant (tests/aarch64 runs it under qemu)")
    lacking = _missing(map_id, variant)
    if lacking:
        note_unchecked(f"{map_id}[{variant}]", lacking)
        pytest.skip(f"{map_id} [{variant}]: host lacks {', '.join(lacking)}")


def runnable_variants(map_id: str, *, ref: bool = True) -> list[str]:
    """map_variants() the target can run; the others are noted for the end-of-run ISA summary line."""
    out = []
    for name in map_variants(map_id, ref=ref):
        if _other_arch(map_id, name):
            continue
        lacking = _missing(map_id, name)
        if lacking:
            note_unchecked(f"{map_id}[{name}]", lacking)
        else:
            out.append(name)
    return out


@functools.cache
def _library(map_id: str, units_key: tuple[tuple[str, tuple[str, ...]], ...]) -> str:
    units = [CompileUnit(KERNEL_ROOT / src, tuple(flags)) for src, flags in units_key]
    return str(build_shared(units, name=f"test_{map_id}"))


def load_map_library(map_id: str) -> tuple[ctypes.CDLL, dict[str, Any]]:
    """Compile every variant source of a map this CPU can run (each with its own cflags) into one .so; return
    (lib, map).

    A variant whose source file does not exist fails the test (AssertionError naming map, variant, file).
    Variants the CPU lacks features for are not built (no test can call them here: bind() gives a function
    that skips the test when called); `make audit` still compiles their sources with their cflags (gcc
    -fsyntax-only -aux-info), and a CPU that has the features builds and runs them.
    """
    spec = load_map(map_id)
    seen: dict[str, tuple[str, ...]] = {}
    listed: dict[str, tuple[str, ...]] = {}
    # a batch row wrapper calls the kernels of the maps it names (`calls`): build those into the library too
    callees = [v for cid in spec.get("calls", ()) for v in load_map(cid)["variants"]]
    for v in [*spec["variants"], *callees]:
        src = v["source"]
        if not (KERNEL_ROOT / src).is_file():
            raise AssertionError(f"{map_id} [{v['name']}]: kernel source {KERNEL_ROOT / src} does not exist")
        flags = tuple(v.get("cflags", ()))
        if flags_arch(flags) not in (None, host_arch()):
            continue  # another architecture's variant: the aarch64 suite builds and runs it under qemu
        if src in listed and listed[src] != flags:
            raise AssertionError(f"{map_id}: source {src} listed with two different cflags sets")
        listed[src] = flags
        if host_can_run(v.get("requires", ()))[0]:
            seen[src] = flags
    key = tuple(sorted(seen.items()))
    return ctypes.CDLL(_library(map_id, key)), spec


def host_arch() -> str:
    """The host's architecture in isa_flags spelling (x86_64, aarch64)."""
    import platform

    return {"amd64": "x86_64", "arm64": "aarch64"}.get(platform.machine().lower(), platform.machine().lower())


@functools.lru_cache(maxsize=1)
def host_features() -> frozenset[str]:
    """The ISA features tests may use: kernelmap.target.target_features() (honours KERNELMAP_ISA)."""
    from kernelmap.target import target_features

    return frozenset(target_features())


def host_can_run(requires: Sequence[str]) -> tuple[bool, str]:
    """(True, "") if the host has every required feature, else (False, "host lacks <features>")."""
    have = host_features()
    lacking = [f for f in requires if f not in have]
    if lacking:
        return False, "host lacks " + ", ".join(lacking)
    return True, ""


def _argtype(entry: dict[str, Any], spec: dict[str, Any]) -> Any:
    source = entry["source"]
    kind, _, name = source.partition(":")
    if kind in _POINTER_SOURCES:
        return ctypes.c_void_p
    if kind == "dim":
        return ctypes.c_int64
    if kind == "runtime":
        return _RUNTIME_TYPES.get(name, ctypes.c_int64)
    if kind == "param":
        types = {p["name"]: p.get("type", "") for p in spec.get("params", [])}
        cast = entry.get("cast", "") or types.get(name, "")
        if cast not in _PARAM_TYPES:
            raise AssertionError(f"{spec['id']}: /call_abi: param {name} has no known C type ({cast!r})")
        return _PARAM_TYPES[cast]
    if kind == "const":
        cast = entry.get("cast", "")
        return _PARAM_TYPES.get(cast, ctypes.c_int64)
    raise AssertionError(f"{spec['id']}: /call_abi: unknown source kind in {source!r}")


def bind(lib: ctypes.CDLL, spec: dict[str, Any], variant: str) -> Callable[..., None]:
    """The ctypes function of one variant, argtypes derived from the map's call_abi, restype void."""
    by_name = {v["name"]: v for v in spec["variants"]}
    if variant not in by_name:
        raise AssertionError(f"{spec['id']}: no variant {variant!r} (have {sorted(by_name)})")
    v = by_name[variant]
    ok, why = host_can_run(v.get("requires", ()))
    if not ok:  # not built into the library (load_map_library): calling it is a skip, as running it would be
        def _skip(*_args: Any) -> None:
            pytest.skip(f"{spec['id']} [{variant}]: {why}")

        return _skip
    fn = getattr(lib, v["symbol"])
    fn.argtypes = [_argtype(p, spec) for p in spec["call_abi"]["params"]]
    fn.restype = None
    return fn


def gguf_layout(spec: dict[str, Any], fn: Callable[..., None]) -> Callable[..., None]:
    """`fn` (a linear.token_major.v1 variant of map `spec`) taking its weight in the GGUF layout: for a map whose
    weight port reads a repacked layout (weights/repack.py), a wrapper that repacks the [N, K] weight at the w
    pointer as the packer would and calls fn on the copy; for any other map, fn itself. Lets the tests that feed
    a contract's every provider llama.cpp's tensors (tests/kernels/test_ops_vs_llama*.py) treat them alike."""
    from kernelmap.gguf.types import by_name
    from kernelmap.weights.repack import REPACKED, repack

    repacked = [p for p in spec.get("weights", ()) if p["layout"] in REPACKED]
    if not repacked:
        return fn
    (port,) = repacked
    kind = by_name(port["dtype"])

    def call(y: Any, w: Any, x: Any, m: int, n: int, k: int, ith: int, nth: int) -> None:
        nbytes = n * k // kind.block_size * kind.type_size
        plain = np.ctypeslib.as_array((ctypes.c_uint8 * nbytes).from_address(w.value))
        packed = repack(port["layout"], port["dtype"], plain, (k, n))
        fn(y, ptr(packed), x, m, n, k, ith, nth)

    return call


def ptr(arr: np.ndarray | None) -> ctypes.c_void_p:
    """A void pointer to a C-contiguous NumPy array's data (None -> NULL).

    The pointer does not keep the array alive: bind temporaries to a name until the call returns.
    """
    if arr is None:
        return ctypes.c_void_p(None)
    if not arr.flags["C_CONTIGUOUS"]:
        raise AssertionError("ptr(): array must be C-contiguous")
    return ctypes.c_void_p(arr.ctypes.data)


def guarded(shape: int | Sequence[int], dtype: Any, fill: float | int | None = None
            ) -> tuple[np.ndarray, Callable[[], None]]:
    """A 64-byte-aligned array with 64 canary bytes on each side, and a check that the canaries survive.

    The array is filled with `fill` (default: NaN for floats, 0x5A bytes otherwise) so a kernel that
    skips an element is visible. Call check() after each kernel call; it raises AssertionError naming
    the side and offset of the first clobbered canary byte.
    """
    dt = np.dtype(dtype)
    shape_t = (shape,) if isinstance(shape, int) else tuple(shape)
    nbytes = int(np.prod(shape_t, dtype=np.int64)) * dt.itemsize
    raw = np.empty(nbytes + 2 * CANARY + _ALIGN, dtype=np.uint8)
    start = (-raw.ctypes.data) % _ALIGN
    region = raw[start:start + nbytes + 2 * CANARY]
    region[:] = _CANARY_BYTE
    body = region[CANARY:CANARY + nbytes]
    view = body.view(dt).reshape(shape_t)
    if fill is None:
        if dt.kind == "f":
            view[...] = np.nan
        else:
            body[:] = 0x5A
    else:
        view[...] = fill

    def check() -> None:
        for side, part in (("before", region[:CANARY]), ("after", region[CANARY + nbytes:])):
            bad = np.flatnonzero(part != _CANARY_BYTE)
            if bad.size:
                raise AssertionError(
                    f"guard bytes {side} the buffer were overwritten: first at offset {int(bad[0])} "
                    f"(value 0x{int(part[bad[0]]):02x}; {bad.size} bytes changed)")

    return view, check


def run_partitioned(fn: Callable[..., None], args_before_ith: Sequence[Any], nth: int,
                    threaded: bool = False) -> None:
    """Call fn(*args, ith, nth) for every ith in 0..nth-1, sequentially or in Python threads (GIL released)."""
    if not threaded:
        for ith in range(nth):
            fn(*args_before_ith, ith, nth)
        return
    threads = [threading.Thread(target=fn, args=(*args_before_ith, ith, nth)) for ith in range(nth)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def assert_close_or_equal(expected: np.ndarray, got: np.ndarray, *, map_id: str, variant: str,
                          comparison: str | dict[str, float] = "bit_exact", context: str = "",
                          show: int = 8) -> None:
    """Assert `got` equals `expected` bit for bit ("bit_exact") or within {rtol, atol}; print mismatches.

    On failure the message names the map id, the variant, the context (shape, nth, ...), the first
    `show` mismatching flat indices with expected and got values, and the max absolute error.
    """
    exp = np.asarray(expected)
    act = np.asarray(got)
    if exp.shape != act.shape:
        raise AssertionError(f"{map_id} [{variant}] {context}: shape {act.shape} != expected {exp.shape}")
    e = exp.reshape(-1)
    a = act.reshape(-1)
    if comparison == "bit_exact":
        if exp.dtype.kind == "f":
            bits = np.dtype(f"u{exp.dtype.itemsize}")
            bad = np.flatnonzero(e.view(bits) != a.astype(exp.dtype).view(bits))
        else:
            bad = np.flatnonzero(e != a)
    else:
        rtol = float(comparison.get("rtol", 0.0))  # type: ignore[union-attr]
        atol = float(comparison.get("atol", 0.0))  # type: ignore[union-attr]
        e64 = e.astype(np.float64)
        a64 = a.astype(np.float64)
        ok = np.abs(a64 - e64) <= atol + rtol * np.abs(e64)
        ok |= np.isnan(e64) & np.isnan(a64)
        ok |= np.isinf(e64) & (e64 == a64)
        bad = np.flatnonzero(~ok)
    if bad.size == 0:
        return
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.abs(a.astype(np.float64) - e.astype(np.float64))
    finite = diff[np.isfinite(diff)]
    max_err = float(finite.max()) if finite.size else float("nan")
    lines = [f"{map_id} [{variant}] {context}: {bad.size} of {e.size} elements differ "
             f"(comparison {comparison}); max abs error {max_err:.6g}"]
    for idx in bad[:show]:
        pos = tuple(int(i) for i in np.unravel_index(int(idx), exp.shape)) if exp.ndim > 1 else int(idx)
        lines.append(f"  at {pos}: expected {e[idx]!r}, got {a[idx]!r}")
    message = "\n".join(lines)
    print(message)
    raise AssertionError(message)

