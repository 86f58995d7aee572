"""The compile pipeline: GGUF -> circuit -> graph -> schedule -> resolve -> plan -> C -> shared library.

Input: a GGUF path and options (policy, extra map dirs, target ISA, prefill batch, profiling). Output:
a build directory holding `model.c`, `km_kernels.h`, `selection_trace.json`, the packed weights and
their manifest, `build.json`, and the path of the compiled shared library (content-addressed in the
cache). Every stage is delegated to its module; this file only wires them in pipeline order.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelmap.build.driver import KERNEL_ROOT, CompileUnit, build_shared, cache_dir, compiler_version
from kernelmap.circuits.graph import Graph
from kernelmap.circuits.hydrate import hydrate, read_config, row_bytes
from kernelmap.circuits.loader import circuit_for, load_interfaces
from kernelmap.codegen.emit import PhasePlan, emit_model
from kernelmap.errors import ModelError
from kernelmap.gguf.reader import open_gguf
from kernelmap.maps.registry import load_registry
from kernelmap.numerics.policy import load_policy
from kernelmap.plan.fuse import fuse_for_target, rules_digest
from kernelmap.plan.memory import Buffer, MemoryPlan, plan_memory
from kernelmap.plan.requests import resolve_graph
from kernelmap.plan.schedule import schedule
from kernelmap.resolve import SelectionTrace
from kernelmap.target import arch_of, host_arch, host_class, target_features

__all__ = ["CompileOptions", "CompiledModel", "compile_model", "BUILD_SCHEMA"]

BUILD_SCHEMA = "kernelmap.build/1"
RUNTIME_DIR = KERNEL_ROOT / "runtime"


@dataclass(frozen=True)
class CompileOptions:
    """What to compile for: numerics policy, extra map dirs, ISA override, prefill batch rows, profiling, fusion."""

    policy: str = "llama-cpu"
    maps: tuple[str, ...] = ()
    isa: frozenset[str] | None = None
    max_rows: int = 128
    profile: bool = False
    allow_candidates: bool = False
    fusion: bool = True


@dataclass(frozen=True)
class CompiledModel:
    """A finished build: where its files are and what it was built from."""

    build_dir: Path
    library: Path
    weights: Path
    info: dict[str, Any]


Progress = Callable[[str], None]


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
    from kernelmap.maps.expr import parse_expr  # the maps' expression grammar

    sizes: dict[str, int] = {}
    for op in graph.ops:
        provider = registry.providers[op.provider]
        for s in provider.raw.get("scratch", []):
            sizes[f"{op.cname}__scratch_{s['name']}"] = int(parse_expr(s["size"]).evaluate(dict(op.dims)))
    return sizes


def _key(*parts: str) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode() + b"\0")
    return h.hexdigest()[:20]


def compile_model(gguf_path: str | os.PathLike[str], options: CompileOptions = CompileOptions(),
                  *, progress: Progress | None = None, out_dir: Path | None = None) -> CompiledModel:
    """Compile a GGUF model into a shared library; reuse a finished build with the same inputs."""
    say = progress or (lambda _msg: None)
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
    cross = arch_of(isa) not in (None, host_arch())  # another machine's build: only its bundle's make compiles it
    gguf_id = gguf.sha256()
    key = _key(BUILD_SCHEMA, gguf_id, circuit.sha256, interfaces.sha256, policy.hash, registry.hash,
               ",".join(sorted(isa)), str(options.max_rows), str(options.profile), str(options.allow_candidates),
               str(options.fusion), rules_digest(cpu_class) if options.fusion else "", compiler_version(),
               _runtime_hash())
    build_dir = out_dir or cache_dir() / "models" / key
    info_path = build_dir / "build.json"
    if info_path.is_file():
        info = json.loads(info_path.read_text())
        lib = Path(info["library"])
        weights = build_dir / "weights.bin"
        if info.get("key") == key and (cross or lib.is_file()) and weights.is_file():
            say("using cached build")
            return CompiledModel(build_dir, lib, weights, info)
    config = read_config(circuit, gguf.metadata, gguf.tensors, source=str(path))
    kv = policy.rule_for("attention").kv or "f32"
    trace = SelectionTrace(hashes={"maps": registry.hash, "circuit": circuit.sha256, "policy": policy.hash,
                                   "interfaces": interfaces.sha256, "gguf": gguf_id})
    allow = frozenset({"production", "candidate"}) if options.allow_candidates else frozenset({"production"})
    build_dir.mkdir(parents=True, exist_ok=True)
    plans: dict[str, PhasePlan] = {}
    mem: dict[str, MemoryPlan] = {}
    say("resolving kernels")
    fusions: list[dict[str, Any]] = []
    try:
        for phase in ("prefill", "decode"):
            graph = hydrate(circuit, config, gguf.tensors, interfaces, phase=phase, max_rows=options.max_rows,
                            kv_dtype=kv, source=str(path))
            if options.fusion:  # logical-stage rules, before the policy is applied
                fusions += [{**r, "phase": phase} for r in fuse_for_target(graph, registry, isa, cpu_class=cpu_class)]
            contracts = schedule(graph, policy, interfaces)
            if options.fusion:  # scheduled-stage rules, matching the contracts the policy chose
                fusions += [{**r, "phase": phase} for r in fuse_for_target(graph, registry, isa, cpu_class=cpu_class,
                                                                          contracts=contracts)]
            resolve_graph(graph, contracts, interfaces, registry, isa, trace, allow)
            mem[phase] = plan_memory(_phase_buffers(graph, _scratch_sizes(graph, registry)))
            plans[phase] = PhasePlan(graph, mem[phase].offsets)
    finally:
        trace.fusions = fusions
        trace.write(build_dir / "selection_trace.json")
    say("packing weights")
    from kernelmap.weights import WeightNeed, pack_weights

    needs: dict[str, WeightNeed] = {}
    for plan in plans.values():
        for op in plan.graph.ops:
            for ref in op.weights.values():
                layout = "ggml_blocks" if ref.dtype not in ("f32", "f16") else "row_major"
                needs.setdefault(ref.cname, WeightNeed(ref.cname, ref.tensor, ref.dtype, layout))
    manifest = pack_weights(gguf, [needs[k] for k in sorted(needs)], build_dir)
    weight_offsets = {e.name: e.offset for e in manifest.entries}
    state = list(plans["prefill"].graph.state.values())
    features: set[str] = set()
    units: dict[tuple[str, tuple[str, ...]], CompileUnit] = {}
    for plan in plans.values():
        for op in plan.graph.ops:
            variant = registry.providers[op.provider].variant(op.variant)
            features |= set(variant.requires)
            src = KERNEL_ROOT / variant.source
            units.setdefault((variant.source, variant.cflags), CompileUnit(src, tuple(variant.cflags)))
    say("generating C")
    arena = max(m.size for m in mem.values())
    hashes = {k: v for k, v in trace.hashes.items()}
    model_c, kernels_h = emit_model(plans["prefill"], plans["decode"], registry=registry,
                                    weight_offsets=weight_offsets, weights_bytes=manifest.total_size,
                                    state=state, arena_bytes=arena, n_vocab=int(config["vocab"]),
                                    ctx_train=int(config["ctx_train"]), hashes=hashes, features=features)
    gen_dir = build_dir / "gen"
    gen_dir.mkdir(exist_ok=True)
    _write_atomic(gen_dir / "model.c", model_c)
    _write_atomic(gen_dir / "km_kernels.h", kernels_h)
    for name in ("km_runtime.h", "km_model.h"):
        _write_atomic(gen_dir / name, (RUNTIME_DIR / name).read_text())
    say("compiling C")
    include = ("-include", str(gen_dir / "km_kernels.h"))
    kernel_units = [CompileUnit(u.source, (*u.cflags, *include)) for _, u in sorted(units.items())]
    profile = ("-DKM_PROFILE",) if options.profile else ()
    all_units = [*kernel_units, CompileUnit(RUNTIME_DIR / "km_runtime.c"),
                 CompileUnit(gen_dir / "model.c", profile)]
    lib = Path() if cross else build_shared(all_units, name="kmmodel", include_dirs=[gen_dir],
                                            link_flags=["-lpthread"], target=",".join(sorted(isa)))
    info = {
        "schema": BUILD_SCHEMA, "key": key, "library": "" if cross else str(lib), "gguf": str(path), "gguf_sha256": gguf_id,
        "architecture": arch, "config": config, "policy": policy.name, "isa": sorted(isa),
        "features": sorted(features), "max_rows": options.max_rows, "profile": options.profile,
        "memory": {phase: {"arena": m.size, "naive": m.naive_size, "summary": m.summary()} for phase, m in mem.items()},
        "ops": {phase: [op.label for op in plan.graph.ops] for phase, plan in plans.items()},
        "units": [{"source": str(u.source.relative_to(KERNEL_ROOT)), "cflags": list(u.cflags)}
                  for _, u in sorted(units.items())],
        "hashes": hashes,
        "state": [{"name": s.cname, "dtype": s.dtype, "heads": int(s.shape[0]), "dim": int(s.shape[2])}
                  for s in state],
        "fusion": options.fusion,
        "fusions_applied": sum(1 for r in fusions if r.get("decision") == "applied"),
        "selection": [[phase, op.label, op.provider, op.variant, registry.providers[op.provider].variant(op.variant).symbol]
                      for phase, plan in sorted(plans.items()) for op in plan.graph.ops],
    }
    _write_atomic(info_path, json.dumps(info, indent=1, sort_keys=True))
    return CompiledModel(build_dir, lib, build_dir / "weights.bin", info)


def _runtime_hash() -> str:
    h = hashlib.sha256()
    for p in sorted(RUNTIME_DIR.glob("*")) + sorted((Path(__file__).parent / "codegen" / "templates").glob("*")):
        h.update(p.name.encode() + p.read_bytes())
    return h.hexdigest()[:16]


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)

