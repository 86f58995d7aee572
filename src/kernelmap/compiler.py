"""The compile pipeline: GGUF -> circuit -> graph -> schedule -> resolve -> plan -> C -> shared library.

Input: a GGUF path and options (policy, extra map dirs, target ISA, prefill batch, profiling,
evidence). Output: a build directory holding `model.c`, `km_kernels.h`, `selection_trace.json`, the
weights manifest (and the packed weights of tensors that need repacking), `build.json`, and the paths
of the model's shared library and of the kernel library it links (both content-addressed in the
cache). The kernel library holds the variants this model selected; its objects are cached one per
kernel unit and shared by every model (`build/kernel_lib.py`), so a model whose kernels some earlier
model already needed compiles only its generated `model.c`, and one that needs a new provider
compiles that provider's unit too. The kernel units compile in the background, next to `model.c`.
Every stage is delegated to its module; this file only wires them in pipeline order.

The cache key covers every input that can change the program or library: the GGUF bytes, the
circuit, interfaces, policy and maps, every file of the kernelmap package (its Python, kernel
sources and headers, templates: `build/inputs.py`), the compiler's identity and sanitizer mode, and
the options. A build is made in a temporary sibling directory and renamed into place complete,
under a per-key lock: concurrent compiles of one model build it once, and a killed build leaves no
half-written directory under the final name.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelmap.build.driver import (
    KERNEL_ROOT,
    CompileUnit,
    build_shared,
    cache_dir,
    compiler_identity,
    file_lock,
    is_locked,
    sanitize_enabled,
    shared_library_path,
)
from kernelmap.build.inputs import source_digest
from kernelmap.build.kernel_lib import KERNEL_LIBRARY, build_kernel_library, kernel_library_units
from kernelmap.circuits.graph import Graph
from kernelmap.circuits.hydrate import hydrate, read_config, row_bytes
from kernelmap.circuits.loader import circuit_for, load_interfaces
from kernelmap.codegen.bind import prototype
from kernelmap.codegen.emit import GGUFCheck, PhasePlan, emit_model, gguf_checksum, gguf_copy_ranges
from kernelmap.codegen.ring import ring_cells
from kernelmap.errors import BuildError, ModelError
from kernelmap.gguf.reader import GGUFFile, open_gguf
from kernelmap.isa_flags import variant_features
from kernelmap.maps.registry import callees, load_registry
from kernelmap.numerics.policy import load_policy
from kernelmap.plan.fuse import fuse_for_target, rules_digest
from kernelmap.plan.memory import Buffer, MemoryPlan, plan_memory
from kernelmap.plan.requests import resolve_graph
from kernelmap.plan.schedule import check_weight_types, schedule
from kernelmap.resolve import SelectionTrace
from kernelmap.target import arch_of, host_arch, host_class, target_features

__all__ = ["BUILD_SCHEMA", "CompileOptions", "CompiledModel", "Counter", "compile_model", "model_key"]

BUILD_SCHEMA = "kernelmap.build/3"
RUNTIME_DIR = KERNEL_ROOT / "runtime"


# Prefill rows per step (the body runs once per this many prompt rows; llama.cpp's n_ubatch default is 512 too).
# Measured on a Zen 5 VM, Gemma 3 270M, in-process A/B of two builds (same logits): a 256-token prompt +0-5%
# with 256 rows over 128 (2 threads, five runs), a 1024-token prompt +5% with 256 over 128 and +0-4% with 512
# over 256 (the weights stream once per step, so longer steps reuse each more). The cost is memory: the
# activation arena (3.5 MB at 128 rows, 14 MB at 512 for that model) and the ring of a sliding-window layer
# (window + rows - 1 cells).
DEFAULT_PREFILL_ROWS = 512


@dataclass(frozen=True)
class CompileOptions:
    """What to compile for: numerics policy, extra map dirs, ISA override, prefill batch rows, profiling, fusion,
    and the rows of the batched decode entry (`batch_rows`: sequences one step advances; 0 = no batch phase)."""

    policy: str = "llama-cpu"
    maps: tuple[str, ...] = ()
    isa: frozenset[str] | None = None
    max_rows: int = DEFAULT_PREFILL_ROWS
    profile: bool = False
    allow_candidates: bool = False
    fusion: bool = True
    batch_rows: int = 0
    evidence: str = "class"  # variant ranking: "class" (the committed evidence of the CPU class), "none", or a file


@dataclass(frozen=True)
class CompiledModel:
    """A finished build: where its files are and what it was built from."""

    build_dir: Path
    library: Path
    weights: Path
    info: dict[str, Any]
    gguf: Path | None = None  # the model file as given now (its tensors are mapped from it at run time)

    @property
    def kernel_library(self) -> Path:
        """The shared kernel library the model library links (the boot check probes its exports)."""
        return Path(self.info["kernel_library"])


Progress = Callable[[str], None]
Counter = Callable[[str, int, int], None]  # (step, done, total): a long step's counts, for a progress bar


def _phase_buffers(graph: Graph, scratch: dict[str, int]) -> list[Buffer]:
    first: dict[str, int] = {}
    last: dict[str, int] = {}
    for i, op in enumerate(graph.ops):
        for tname in op.outputs.values():
            first.setdefault(tname, i)
            last[tname] = max(last.get(tname, i), i)
        for tname in op.inputs.values():
            first.setdefault(tname, i)
            last[tname] = i
    end = len(graph.ops)
    for tname in graph.outputs.values():
        last[tname] = end
    for tname, t in graph.tensors.items():
        if t.kind == "input":
            first[tname] = -1
    buffers = []
    for tname, t in graph.tensors.items():
        if tname not in first:
            continue
        rows = t.shape[0] if len(t.shape) > 1 else 1
        cols = t.shape[-1]
        size = rows * row_bytes(t.dtype, cols) if len(t.shape) > 1 else row_bytes(t.dtype, cols)
        buffers.append(Buffer(tname, size, first[tname], last[tname]))
    for i, op in enumerate(graph.ops):
        key = f"{op.cname}__scratch_"
        for name, size in scratch.items():
            if name.startswith(key):
                buffers.append(Buffer(name, size, i, i))
    return buffers


def _scratch_sizes(graph: Graph, registry: Any) -> dict[str, int]:
    from kernelmap.plan.requests import scratch_sizes  # over the run-time dims; a negative size is an error

    return scratch_sizes(graph, registry)


def _key(*parts: str) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode() + b"\0")
    return h.hexdigest()[:20]


@dataclass(frozen=True)
class _Inputs:
    """Everything a build reads, loaded once, and the cache key made from it."""

    path: Path
    gguf: GGUFFile
    arch: str
    circuit: Any
    interfaces: Any
    policy: Any
    registry: Any
    isa: frozenset[str]
    cpu_class: str
    evidence: Any
    key: str


def _load_inputs(gguf_path: str | os.PathLike[str], options: CompileOptions, say: Progress) -> _Inputs:
    path = Path(gguf_path)
    if not path.is_file():
        raise ModelError("model file not found", path=path, hint="pass -m PATH to a .gguf file")
    say("reading model")
    gguf = open_gguf(path)
    arch = gguf.metadata.get("general.architecture")
    if not isinstance(arch, str):
        raise ModelError("metadata key is missing or not a string", path=path, pointer="general.architecture")
    circuit = circuit_for(arch)
    interfaces = load_interfaces()
    policy = load_policy(options.policy)
    registry = load_registry(options.maps)
    isa = frozenset(options.isa) if options.isa is not None else target_features()
    cpu_class = host_class(isa)
    evidence = _load_evidence(options.evidence, cpu_class)
    key = _key(BUILD_SCHEMA, gguf.sha256(), circuit.sha256, interfaces.sha256, policy.hash, registry.hash,
               ",".join(sorted(isa)), str(options.max_rows), str(options.profile), str(options.allow_candidates),
               str(options.fusion), rules_digest(cpu_class) if options.fusion else "", compiler_identity(),
               f"batch_rows={options.batch_rows}",
               f"sanitize={sanitize_enabled()}", source_digest(),
               "evidence=" + (json.dumps(sorted(evidence.points.items())) if evidence is not None else "none"))
    return _Inputs(path, gguf, arch, circuit, interfaces, policy, registry, isa, cpu_class, evidence, key)


def _load_evidence(choice: str, cpu_class: str) -> Any:
    """The variant evidence a build ranks with: the class's committed file, none, or a given file."""
    from kernelmap.lkb.evidence import load_variant_evidence

    if choice == "none":
        return None
    if choice == "class":
        return load_variant_evidence(cpu_class)
    if not Path(choice).is_file():
        raise ModelError("evidence file not found", path=choice, hint='pass a measurements.toml, "class" or "none"')
    return load_variant_evidence(cpu_class, choice)


def model_key(gguf_path: str | os.PathLike[str], options: CompileOptions = CompileOptions()) -> str:
    """The cache key `compile_model` would use for these inputs (without building anything)."""
    return _load_inputs(gguf_path, options, lambda _msg: None).key


def compile_model(gguf_path: str | os.PathLike[str], options: CompileOptions = CompileOptions(),
                  *, progress: Progress | None = None, out_dir: Path | None = None,
                  counter: Counter | None = None) -> CompiledModel:
    """Compile a GGUF model into a shared library; reuse a finished build with the same inputs.

    `progress(message)` names each step as it starts; `counter(step, done, total)` counts the long ones
    (kernel units compiled, tensors packed)."""
    say = progress or (lambda _msg: None)
    count = counter or (lambda _step, _done, _total: None)
    inputs = _load_inputs(gguf_path, options, say)
    key = inputs.key
    build_dir = Path(out_dir) if out_dir is not None else cache_dir() / "models" / key
    limit = model_cache_limit() if out_dir is None else None  # a bad value fails before any work
    found = _cached(build_dir, key, inputs.path)
    if found is not None:
        say("using cached build")
        if out_dir is None:
            _touch(build_dir)
        return found
    try:
        build_dir.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BuildError(f"cannot create the build directory: {exc.strerror}", path=build_dir.parent,
                         hint="check permissions and free space, or set KERNELMAP_CACHE") from None
    with file_lock(_lock_path(build_dir), waiting=lambda: say("waiting for another process building this model")):
        found = _cached(build_dir, key, inputs.path)
        if found is not None:  # built by the process we waited for
            say("using cached build")
            return found
        _sweep_temps(build_dir, all_keys=out_dir is None)
        _check_replaceable(build_dir)
        tmp = Path(tempfile.mkdtemp(prefix=f".{build_dir.name}{_TEMP_MARK}", dir=build_dir.parent))
        try:
            info = _build(tmp, inputs, options, say, count)
            _install(tmp, build_dir)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    if limit is not None:
        evicted = evict_models(build_dir.parent, limit, keep=build_dir)
        if evicted:
            say(f"model cache: removed {len(evicted)} least recently used build(s), "
                f"{sum(size for _, size in evicted) / 2**20:.0f} MiB, to stay under "
                f"{limit / 2**30:g} GiB ({MODEL_CACHE_ENV})")
    return CompiledModel(build_dir, Path(info["library"]), build_dir / "weights.bin", info, inputs.path)


# The models dir of the cache keeps one build per (model, options): each holds the packed weights (about the
# model's size), so without a bound it grew by a model's size for every file or option set ever compiled (16 GiB
# on the development machine). After each new build the least recently used ones (a cache hit touches its
# directory) are removed until the rest fit the limit; the new build stays even when it alone exceeds it, and a
# build whose lock another process holds (being built or rebuilt) is skipped. A process still running an evicted
# build keeps working (its mapped files live until unmapped); the next compile of it rebuilds.
MODEL_CACHE_ENV = "KERNELMAP_MODEL_CACHE_GB"
DEFAULT_MODEL_CACHE_GB = 10.0


def model_cache_limit() -> int | None:
    """Bytes the cache's model builds may use ($KERNELMAP_MODEL_CACHE_GB GiB, default 10; "unlimited": None)."""
    raw = os.environ.get(MODEL_CACHE_ENV, "").strip()
    if not raw:
        return int(DEFAULT_MODEL_CACHE_GB * 2**30)
    if raw.lower() == "unlimited":
        return None
    try:
        gib = float(raw)
    except ValueError:
        gib = float("nan")
    if not (0 < gib < float("inf")):
        raise BuildError("model cache limit out of range", pointer=MODEL_CACHE_ENV, value=raw,
                         expected="a number of GiB > 0, or unlimited")
    return int(gib * 2**30)


def _touch(build_dir: Path) -> None:
    try:
        os.utime(build_dir)
    except OSError:
        pass  # a read-only cache still serves builds; only its eviction order is affected


def _tree_bytes(path: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                pass
    return total


def model_builds(models: Path) -> list[tuple[float, Path, int]]:
    """The finished builds in a cache's models dir: (last use, build dir, bytes), least recently used first."""
    builds = []
    for d in models.iterdir() if models.is_dir() else ():
        if d.name.startswith(".") or not d.is_dir():
            continue
        try:
            builds.append((d.stat().st_mtime, d, _tree_bytes(d)))
        except OSError:
            continue
    return sorted(builds, key=lambda b: b[0])


def evict_models(models: Path, limit: int, *, keep: Path | None) -> list[tuple[Path, int]]:
    """Remove the least recently used builds in `models` (not `keep`, not locked) until the builds' bytes fit
    `limit`; returns the removed (build dir, bytes)."""
    builds = model_builds(models)
    total = sum(size for _, _, size in builds)
    removed = []
    for _, d, size in builds:
        if total <= limit:
            break
        if d == keep or is_locked(_lock_path(d)):
            continue
        # renamed first (one atomic step: a concurrent lookup sees the whole build or none), then deleted; a
        # rename that fails (another process evicting it) skips the build
        gone = d.with_name(f".{d.name}{_OLD_MARK}evict-{os.getpid()}")
        try:
            d.rename(gone)
        except OSError:
            continue
        shutil.rmtree(gone, ignore_errors=True)
        total -= size
        removed.append((d, size))
    return removed


_TEMP_MARK = ".tmp-"
_OLD_MARK = ".old-"


def _lock_path(build_dir: Path) -> Path:
    """The per-build lock: a sibling file, never deleted (so no waiter can hold a lock on a stale inode)."""
    return build_dir.with_name(f".{build_dir.name}.lock")


def _cached(build_dir: Path, key: str, gguf: Path) -> CompiledModel | None:
    """The finished build in `build_dir` if it was made from exactly `key` and its libraries are still
    in the cache, else None."""
    try:
        info = json.loads((build_dir / "build.json").read_text())
    except (OSError, ValueError):
        return None
    if (not isinstance(info, dict) or info.get("key") != key
            or not all(isinstance(info.get(k), str) for k in ("library", "kernel_library"))):
        return None
    lib = Path(info["library"])
    weights = build_dir / "weights.bin"
    host_lib = info["library"] == "" or (lib.is_file() and Path(info["kernel_library"]).is_file())
    if not (host_lib and weights.is_file() and (build_dir / "weights.json").is_file()):
        return None
    return CompiledModel(build_dir, lib, weights, info, gguf)


def _sweep_temps(build_dir: Path, *, all_keys: bool) -> None:
    """Remove temp and displaced dirs that dead builders left beside `build_dir` (caller holds its lock,
    so every one of its own is dead); with `all_keys` (the cache's models dir) also those of other
    keys whose lock file exists and is free."""
    parent = build_dir.parent
    for tmp in parent.glob(".*"):
        for mark in (_TEMP_MARK, _OLD_MARK):
            base = tmp.name[1:].rpartition(mark)[0] if mark in tmp.name else ""
            if not base or not tmp.is_dir():
                continue
            lock = parent / f".{base}.lock"
            if base == build_dir.name or (all_keys and lock.is_file() and not is_locked(lock)):
                shutil.rmtree(tmp, ignore_errors=True)


# What a finished build directory holds (_build writes these and nothing else): a directory holding anything more
# is not replaced, so an out_dir that is a previous build with a user's file added keeps that file.
_BUILD_ENTRIES = frozenset({"build.json", "selection_trace.json", "weights.bin", "weights.json", "gen",
                            ".weights.lock"})  # weights/pack.py's lock file
_GEN_ENTRIES = frozenset({"model.c", "km_kernels.h", "km_model.h", "km_runtime.h"})


def _check_replaceable(build_dir: Path) -> None:
    """Refuse to replace a directory that is not a kernelmap build: an out_dir must be new, empty, or a previous
    build holding only the files a build writes (a build.json alone is not enough: a bundle has one too)."""
    if not build_dir.exists():
        return
    if not build_dir.is_dir():
        raise BuildError("the build directory path exists and is not a directory", path=build_dir)
    entries = sorted(p.name for p in build_dir.iterdir())
    if not entries:
        return
    hint = "pass an empty or new directory, or a previous build's directory"
    if "build.json" not in entries:
        raise BuildError("the build directory exists and is not a kernelmap build (no build.json)", path=build_dir,
                         hint=hint)
    gen = build_dir / "gen"
    extra = [e for e in entries if e not in _BUILD_ENTRIES]
    if not extra and gen.is_dir() and not gen.is_symlink():
        extra = [f"gen/{e}" for e in sorted(p.name for p in gen.iterdir()) if e not in _GEN_ENTRIES]
    if extra:
        raise BuildError("the build directory holds files a build does not write; not replaced", path=build_dir,
                         value=extra[0], hint=hint)


def _install(tmp: Path, build_dir: Path) -> None:
    """Rename the finished temp dir to `build_dir` (caller holds the lock). A previous dir there is
    renamed aside first and removed after, so a reader only ever sees the old build, none, or the new."""
    _fsync_path(tmp)
    old = None
    if build_dir.exists() or build_dir.is_symlink():
        old = build_dir.with_name(f".{build_dir.name}{_OLD_MARK}{os.getpid()}")
        os.replace(build_dir, old)
    os.replace(tmp, build_dir)
    _fsync_path(build_dir.parent)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def _fsync_path(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _build(build_dir: Path, inputs: _Inputs, options: CompileOptions, say: Progress,
           count: Counter) -> dict[str, Any]:
    """Every stage after the cache check, writing into `build_dir` (a fresh temp dir); returns build.json's content."""
    path, gguf, arch, circuit, interfaces = inputs.path, inputs.gguf, inputs.arch, inputs.circuit, inputs.interfaces
    policy, registry, isa, cpu_class, key = inputs.policy, inputs.registry, inputs.isa, inputs.cpu_class, inputs.key
    gguf_id = gguf.sha256()
    config = read_config(circuit, gguf.metadata, gguf.tensors, source=str(path))
    kv = policy.rule_for("attention").kv or "f32"
    trace = SelectionTrace(hashes={"maps": registry.hash, "circuit": circuit.sha256, "policy": policy.hash,
                                   "interfaces": interfaces.sha256, "gguf": gguf_id})
    allow = frozenset({"production", "candidate"}) if options.allow_candidates else frozenset({"production"})
    cross = arch_of(isa) not in (None, host_arch())  # another machine's build: only its bundle's make compiles it
    plans: dict[str, PhasePlan] = {}
    mem: dict[str, MemoryPlan] = {}
    say("resolving kernels")
    fusions: list[dict[str, Any]] = []
    try:
        for phase in ("prefill", "decode", *(("batch",) if options.batch_rows > 0 else ())):
            rows = options.batch_rows if phase == "batch" else options.max_rows
            graph = hydrate(circuit, config, gguf.tensors, interfaces, phase=phase, max_rows=rows,
                            kv_dtype=kv, source=str(path))
            if options.fusion:  # logical-stage rules, before the policy is applied
                fusions += [{**r, "phase": phase} for r in fuse_for_target(graph, registry, isa, cpu_class=cpu_class)]
            check_weight_types(graph, policy, source=str(path))
            contracts = schedule(graph, policy, interfaces)
            if options.fusion:  # scheduled-stage rules, matching the contracts the policy chose
                fusions += [{**r, "phase": phase} for r in fuse_for_target(graph, registry, isa, cpu_class=cpu_class,
                                                                          contracts=contracts)]
            resolve_graph(graph, contracts, interfaces, registry, isa, trace, allow, evidence=inputs.evidence)
            mem[phase] = plan_memory(_phase_buffers(graph, _scratch_sizes(graph, registry)))
            plans[phase] = PhasePlan(graph, mem[phase].offsets)
        # the selected kernels and the kernels they call (a batch wrapper's callee: same variant name)
        selected = sorted({(pair[0].id, pair[1]) for plan in plans.values() for op in plan.graph.ops
                           for pair in [(registry.providers[op.provider], op.variant),
                                        *callees(registry.providers[op.provider], registry, op.variant)]})
        # The kernel library holds exactly the selection; its objects (shared with every model) compile in
        # the background while the trace is written, the weights packed and the model's C generated and compiled.
        kernels = None if cross else _Background(lambda: build_kernel_library(
            registry, isa, selected, progress=lambda done, total: count("compiling kernel units", done, total)))
    finally:
        trace.fusions = fusions
        trace.write(build_dir / "selection_trace.json")
    say("packing weights")
    from kernelmap.weights import WeightNeed, pack_weights, weight_name
    from kernelmap.weights.repack import REPACKED

    needs: dict[str, WeightNeed] = {}
    dense: set[str] = set()  # weights some op reads whole (not only rows picked at run time: access "gather")
    for plan in plans.values():
        for op in plan.graph.ops:
            ports = registry.providers[op.provider].ports
            for port, ref in op.weights.items():
                # the GGUF's own layout, or the repacked one the selected provider's port reads (its own entry)
                layout = ports[port].layout if ports[port].layout in REPACKED else (
                    "ggml_blocks" if ref.dtype not in ("f32", "f16", "bf16") else "row_major")
                name = weight_name(ref.cname, layout)
                needs.setdefault(name, WeightNeed(name, ref.tensor, ref.dtype, layout, rows=ref.rows))
                if ports[port].access != "gather":
                    dense.add(name)
    manifest = pack_weights(gguf, [needs[k] for k in sorted(needs)], build_dir,
                            progress=lambda done, total: count("packing weights", done, total))
    # Tensors in the GGUF layout stay in the model file (the program maps it); the rest are in weights.bin.
    weight_offsets: dict[str, Any] = {e.name: ("G", e.offset) if e.file == "gguf" else e.offset
                                      for e in manifest.entries}
    gguf_check = None
    if any(e.file == "gguf" for e in manifest.entries):
        with open(path, "rb") as fh:
            head = fh.read(gguf.data_offset)
        gguf_check = GGUFCheck(gguf.size, gguf.data_offset, gguf_checksum(head), gguf_copy_ranges(
            gguf.size, gguf.data_offset, [(e.offset, e.size) for e in manifest.entries
                                          if e.file == "gguf" and e.name in dense]))
    state = list(plans["prefill"].graph.state.values())
    features: set[str] = set()
    units: dict[tuple[str, tuple[str, ...]], CompileUnit] = {}
    called: dict[str, str] = {}  # symbol -> prototype of the kernels selected ones call (batch wrappers)
    for plan in plans.values():
        for op in plan.graph.ops:
            provider = registry.providers[op.provider]
            pairs = [(provider, op.variant), *callees(provider, registry, op.variant)]
            for prov, vname in pairs:
                variant = prov.variant(vname)
                # The start-up check tests every feature the variant's flags imply, not only what it lists.
                features |= variant_features(variant.requires, variant.cflags)
                src = KERNEL_ROOT / variant.source
                units.setdefault((variant.source, variant.cflags), CompileUnit(src, tuple(variant.cflags)))
                if prov is not provider:
                    called[variant.symbol] = prototype(prov.raw, variant.symbol)
    say("generating C")
    ring = ring_cells(plans.values(), registry, state)
    arena = max(m.size for m in mem.values())
    hashes = {k: v for k, v in trace.hashes.items()}
    model_c, kernels_h = emit_model(plans["prefill"], plans["decode"], registry=registry,
                                    weight_offsets=weight_offsets, weights_bytes=manifest.total_size,
                                    state=state, arena_bytes=arena, n_vocab=int(config["vocab"]),
                                    ctx_train=int(config["ctx_train"]), hashes=hashes, features=features,
                                    batch=plans.get("batch"), extra_protos=called, gguf_check=gguf_check, ring=ring)
    gen_dir = build_dir / "gen"
    gen_dir.mkdir(exist_ok=True)
    _write_atomic(gen_dir / "model.c", model_c)
    _write_atomic(gen_dir / "km_kernels.h", kernels_h)
    for name in ("km_runtime.h", "km_model.h"):
        _write_atomic(gen_dir / name, (RUNTIME_DIR / name).read_text())
    lib = kernel_lib = Path()
    lib_variants: list[tuple[str, str]] = []
    profile = ("-DKM_PROFILE",) if options.profile else ()
    if kernels is not None:
        say("compiling the model")
        kernel_lib = shared_library_path(kernel_library_units(registry, selected), name=KERNEL_LIBRARY,
                                         link_flags=["-lpthread"], target=",".join(sorted(isa)))

        def kernels_ready() -> None:
            say("compiling kernel units")
            built, pairs = kernels.result()
            if built != kernel_lib:
                raise BuildError("the kernel library was built under another path than planned", path=built,
                                 expected=str(kernel_lib))
            lib_variants[:] = pairs
        # The model links the kernel library by its absolute path (DT_NEEDED names it), and every symbol
        # it calls must resolve there at link time (-z defs; not under ASan, whose runtime is preloaded).
        # model.c compiles alongside the kernel units; its link waits for their library.
        link = [str(kernel_lib), *(() if sanitize_enabled() else ("-Wl,-z,defs",)), "-lpthread"]
        lib = build_shared([CompileUnit(gen_dir / "model.c", profile)], name="kmmodel", include_dirs=[gen_dir],
                           link_flags=link, target=",".join(sorted(isa)), before_link=kernels_ready,
                           progress=lambda done, total: count("compiling the model", done, total))
    info = {
        "schema": BUILD_SCHEMA, "key": key, "library": "" if cross else str(lib),
        "kernel_library": "" if cross else str(kernel_lib),
        "kernel_library_variants": [list(p) for p in lib_variants], "gguf": str(path), "gguf_sha256": gguf_id,
        "architecture": arch, "config": config, "policy": policy.name, "isa": sorted(isa),
        "features": sorted(features), "max_rows": options.max_rows, "profile": options.profile,
        "batch_rows": options.batch_rows,
        "weights": {"packed_bytes": manifest.total_size,
                    "mapped_from_gguf": sum(e.size for e in manifest.entries if e.file == "gguf"),
                    "gguf_size": gguf.size},
        "memory": {phase: {"arena": m.size, "naive": m.naive_size, "summary": m.summary()} for phase, m in mem.items()},
        "ops": {phase: [op.label for op in plan.graph.ops] for phase, plan in plans.items()},
        "units": [{"source": str(u.source.relative_to(KERNEL_ROOT)), "cflags": list(u.cflags)}
                  for _, u in sorted(units.items())],
        "hashes": hashes,
        "state": [{"name": s.cname, "dtype": s.dtype, "heads": int(s.shape[0]), "dim": int(s.shape[2]),
                   "ring": ring[s.cname][0], "window": ring[s.cname][1]} for s in state],
        "fusion": options.fusion,
        "fusions_applied": sum(1 for r in fusions if r.get("decision") == "applied"),
        "selection": [[phase, op.label, op.provider, op.variant, registry.providers[op.provider].variant(op.variant).symbol]
                      for phase, plan in sorted(plans.items()) for op in plan.graph.ops],
    }
    _write_atomic(build_dir / "build.json", json.dumps(info, indent=1, sort_keys=True))
    return info


class _Background:
    """Run `fn` in a daemon thread; `result()` joins it and returns its value or raises its exception.
    (Daemon: a build that fails before it needs the result does not wait for it at exit.)"""

    def __init__(self, fn: Callable[[], Any]) -> None:
        self._value: Any = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(fn,), daemon=True, name="kernel-library")
        self._thread.start()

    def _run(self, fn: Callable[[], Any]) -> None:
        try:
            self._value = fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller of result()
            self._error = exc

    def result(self) -> Any:
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._value


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
