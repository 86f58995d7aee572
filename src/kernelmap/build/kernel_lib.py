"""Build stage: the kernel library of one CPU and numerics policy, built once and shared by every model.

Input: the kernel-map registry, the numerics policy, the target ISA and its CPU class, the lifecycles
a build may select, the class's variant evidence, and the (provider, variant) pairs a plan selected.
Output: `libkmkernels.so` in the build cache holding the runtime (thread pool) and every variant the
resolver can select under this policy on this ISA. A generated model is compiled alone and linked
against it, so a model never seen before compiles one C file, not its kernels.

Which variants: every provider whose contract the policy (or a fusion rule of the class) can request
and whose lifecycle is allowed contributes the runnable variants (requires within the ISA) the
resolver could rank first: the best by priority, every variant the class's evidence chooses at some
measured shape and row count, or all of them where variant constraints make eligibility depend on the
request. The plan's own selection is always added, so a selection the set did not foresee still links
(in a library of its own). Each kernel unit is compiled with its own
prototypes force-included, derived from its map's call_abi like the model's km_kernels.h, so a
definition whose types disagree with its map, or an exported function no map declares, fails to build.

The library's cache address is the content of its objects (sources, headers, flags, prototypes,
compiler identity; see build.driver), so it is rebuilt exactly when a kernel input changes, and each
object is cached on its own: an edited kernel source recompiles that unit only.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from kernelmap.build.driver import KERNEL_ROOT, CompileUnit, Counter, build_shared

__all__ = ["KERNEL_LIBRARY", "RUNTIME_SOURCE", "build_kernel_library", "kernel_library_units",
           "selectable_variants"]

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


def kernel_library_units(registry: Any, pairs: Iterable[tuple[str, str]], *, runtime: bool = True
                         ) -> list[CompileUnit]:
    """One unit per (source, cflags) of the given variants, each with its variants' prototypes as prelude,
    then (with `runtime`) the runtime; in a stable order."""
    from kernelmap.codegen.bind import prototype
    from kernelmap.codegen.emit import kernels_header

    protos: dict[tuple[str, tuple[str, ...]], dict[str, str]] = {}
    for pid, name in sorted(set(pairs)):
        provider = registry.providers[pid]
        variant = provider.variant(name)
        protos.setdefault((variant.source, tuple(variant.cflags)), {})[variant.symbol] = prototype(
            provider.raw, variant.symbol)
    units = [CompileUnit(KERNEL_ROOT / src, flags, kernels_header(p)) for (src, flags), p in sorted(protos.items())]
    return [*units, CompileUnit(RUNTIME_SOURCE)] if runtime else units


def build_kernel_library(registry: Any, policy: Any, isa: frozenset[str], cpu_class: str, allow: frozenset[str],
                         evidence: Any = None, *, selected: Iterable[tuple[str, str]] = (),
                         progress: Counter | None = None) -> tuple[Path, list[tuple[str, str]]]:
    """Build (or reuse) the kernel library; return its path and the (provider, variant) pairs it holds."""
    pairs = sorted(set(selectable_variants(registry, policy, isa, cpu_class, allow, evidence)) | set(selected))
    units = kernel_library_units(registry, pairs)
    lib = build_shared(units, name=KERNEL_LIBRARY, link_flags=["-lpthread"], target=",".join(sorted(isa)),
                       progress=progress)
    return lib, pairs
