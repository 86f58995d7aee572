"""Build stage: the kernel library of one model's selection, linked from objects shared by every model.

Input: the kernel-map registry and the (provider, variant) pairs a plan selected (the compiler adds
the kernels a selected batch wrapper calls). Output: `libkmkernels.so` in the build cache holding the
runtime (thread pool) and exactly those variants. A generated model is compiled alone and linked
against it.

The unit of sharing is the object, not the library: one object per (source, cflags), compiled with
the prototypes of every registry variant built from that same source and flags force-included
(derived from their maps' call_abi like the model's km_kernels.h, so a definition whose types
disagree with its map, or an exported function no map declares, fails to build). That prelude does
not depend on which variants a plan selected, so an object compiled for one model (or for the
fuser's probe library) is the object every later model uses: a model that needs a provider no
earlier model needed compiles only that provider's unit and relinks (a link is a fraction of a
second). The library's cache address is the content of its objects (sources, headers, flags,
prototypes, compiler identity; see build.driver).

Which variants a first run compiles is therefore what the resolver selected on this CPU (the best
runnable variant of each requested provider, or the one evidence ranks first), never every variant
the policy could select: `selectable_variants` names that larger set (the kernels some model could
need under a policy on a CPU class), for tools that want to build it ahead of time.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from kernelmap.build.driver import KERNEL_ROOT, CompileUnit, Counter, build_shared

__all__ = ["KERNEL_LIBRARY", "RUNTIME_SOURCE", "build_kernel_library", "check_exports", "kernel_library_units",
           "selectable_variants", "unit_prelude"]

KERNEL_LIBRARY = "kmkernels"
RUNTIME_SOURCE = KERNEL_ROOT / "runtime" / "km_runtime.c"


def _requestable_contracts(policy: Any, cpu_class: str) -> set[str]:
    """Contracts a build under `policy` on `cpu_class` can request: the policy's rules and the
    contracts the class's scheduled-stage fusion rules give their fused ops."""
    from kernelmap.plan.fuse import load_rules

    contracts = {rule.contract for rule in policy.rules}
    contracts |= {rule.contract for rule in load_rules(cpu_class) if rule.contract}
    return contracts


def selectable_variants(registry: Any, policy: Any, isa: frozenset[str], cpu_class: str,
                        allow: frozenset[str], evidence: Any = None) -> list[tuple[str, str]]:
    """(provider id, variant name) of every variant the resolver can select under these inputs, sorted."""
    contracts = _requestable_contracts(policy, cpu_class)
    out: set[tuple[str, str]] = set()
    for pid, provider in sorted(registry.providers.items()):
        if provider.contract not in contracts or provider.status not in allow:
            continue
        runnable = [v for v in provider.ranked_variants if v.requires <= isa]
        if not runnable:
            continue
        if any(v.constraints for v in runnable):
            out.update((pid, v.name) for v in runnable)
            continue
        out.add((pid, runnable[0].name))
        if evidence is not None and pid in evidence.providers:
            out.update((pid, name) for name in evidence.winners(pid, [v.name for v in runnable]))
    return sorted(out)


def unit_prelude(registry: Any, source: str, cflags: tuple[str, ...]) -> str:
    """The prototypes force-included into the unit (`source`, `cflags`): every registry variant built
    from that source with those flags (independent of any selection, so the object is shared)."""
    from kernelmap.codegen.bind import prototype
    from kernelmap.codegen.emit import kernels_header

    protos = {v.symbol: prototype(p.raw, v.symbol) for _pid, p in sorted(registry.providers.items())
              for v in p.variants if v.source == source and tuple(v.cflags) == tuple(cflags)}
    return kernels_header(protos)


def kernel_library_units(registry: Any, pairs: Iterable[tuple[str, str]], *, runtime: bool = True
                         ) -> list[CompileUnit]:
    """One unit per (source, cflags) of the given variants, each with `unit_prelude`, then (with
    `runtime`) the runtime; in a stable order."""
    keys: set[tuple[str, tuple[str, ...]]] = set()
    for pid, name in set(pairs):
        variant = registry.providers[pid].variant(name)
        keys.add((variant.source, tuple(variant.cflags)))
    units = [CompileUnit(KERNEL_ROOT / src, flags, unit_prelude(registry, src, flags)) for src, flags in sorted(keys)]
    return [*units, CompileUnit(RUNTIME_SOURCE)] if runtime else units


def build_kernel_library(registry: Any, isa: frozenset[str], selected: Iterable[tuple[str, str]], *,
                         progress: Counter | None = None) -> tuple[Path, list[tuple[str, str]]]:
    """Build (or reuse) the kernel library of `selected` (provider, variant) pairs, compiling only the
    objects the cache lacks; return its path and the pairs it holds."""
    pairs = sorted(set(selected))
    units = kernel_library_units(registry, pairs)
    lib = build_shared(units, name=KERNEL_LIBRARY, link_flags=["-lpthread"], target=",".join(sorted(isa)),
                       progress=progress)
    check_exports(registry, lib, pairs)
    return lib, pairs


def check_exports(registry: Any, lib: Path, pairs: Iterable[tuple[str, str]]) -> None:
    """Refuse a library that lacks a selected variant's symbol, naming the map and the variant's symbol field: a map
    may declare a symbol its source does not define (the prelude declares the prototype, so the source compiles and
    the library links); without this the model's link failed later with the linker's own lines, naming no map."""
    from kernelmap.build.probe import probe_library
    from kernelmap.errors import BuildError

    exported = probe_library(lib)
    for pid, name in sorted(set(pairs)):
        provider = registry.providers[pid]
        index, variant = next((i, v) for i, v in enumerate(provider.variants) if v.name == name)
        if variant.symbol not in exported:
            raise BuildError(f"the kernel library does not define this variant's symbol (its source {variant.source} "
                             "has no external function of that name)", path=provider.path,
                             pointer=f"/variants/{index}/symbol", value=variant.symbol,
                             hint="fix the map's symbol, or define the function in its source")
