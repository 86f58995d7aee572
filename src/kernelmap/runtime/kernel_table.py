"""Runtime boot check: what a compiled kernel library really exports decides what a plan may call.

Input: a shared object and the plan's selection (phase, op label, map id, variant, symbol), or a
registry and target ISA for the full-library probe the fuser uses. Output: a `KernelTable` (symbol ->
map id and variant) or a one-line ModelError naming the op, map id and symbol that has no handle. It
reads the ELF dynamic symbol table only; it never loads the library nor trusts the maps.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from kernelmap.build.driver import KERNEL_ROOT, CompileUnit, build_shared
from kernelmap.build.probe import probe_library
from kernelmap.errors import ModelError

__all__ = [
    "AvailableKernels",
    "KernelTable",
    "Selected",
    "available_kernels",
    "build_kernel_library",
    "check_build",
    "check_library",
    "selection_from_graphs",
    "selection_from_trace",
]


class Selected(NamedTuple):
    """One kernel a plan calls: in which phase, for which op instance, from which map and variant."""

    phase: str
    op: str
    map_id: str
    variant: str
    symbol: str


@dataclass(frozen=True)
class KernelTable:
    """Handles of every selected kernel the library exports: symbol -> (map id, variant)."""

    library: Path
    handles: Mapping[str, tuple[str, str]]

    def handle(self, map_id: str, symbol: str) -> tuple[str, str]:
        """The (map id, variant) of `symbol`; ModelError when the table has no handle for it."""
        found = self.handles.get(symbol)
        if found is None or found[0] != map_id:
            raise ModelError(f"the plan selects {map_id}::{symbol}, which this library does not export",
                             path=self.library)
        return found


@dataclass(frozen=True)
class AvailableKernels:
    """The (map id, variant, symbol) kernels a probed library exports, and the library probed."""

    library: Path
    kernels: frozenset[tuple[str, str, str]]
    known: frozenset[str] = frozenset()  # every map id of the registry probed against
    isa: frozenset[str] = frozenset()  # the target features the library was built for
    absent_sources: tuple[str, ...] = ()  # variant sources some map names that do not exist

    @property
    def map_ids(self) -> frozenset[str]:
        """Map ids with at least one exported variant."""
        return frozenset(k[0] for k in self.kernels)

    def has_map(self, map_id: str) -> bool:
        """True when some variant of `map_id` is exported."""
        return map_id in self.map_ids


def check_library(library: str | Path, selection: Sequence[Selected | tuple[str, str, str, str, str]]
                  ) -> KernelTable:
    """Probe `library` and refuse (ModelError), in plan order, the first selected kernel whose symbol is not
    `km_<map id>__<variant>` of its own selection, or which the library does not export."""
    path = Path(library)
    exported = probe_library(path)
    handles: dict[str, tuple[str, str]] = {}
    for entry in selection:
        sel = Selected(*entry)
        want = f"km_{sel.map_id}__{sel.variant}"
        if sel.symbol != want:
            raise ModelError(f"the plan selects {sel.map_id}::{sel.variant} for {sel.phase}:{sel.op} with symbol "
                             f"{sel.symbol}, which is not that map's variant", path=path,
                             pointer=f"{sel.phase}:{sel.op}", value=sel.symbol, expected=want,
                             hint="the selection (trace) was edited or comes from another registry; rebuild the model")
        if sel.symbol not in exported:
            raise ModelError(f"the plan selects {sel.map_id}::{sel.symbol} for {sel.phase}:{sel.op}, which this "
                             "library does not export", path=path, pointer=f"{sel.phase}:{sel.op}",
                             value=sel.symbol,
                             hint="the library is stale or was built without this kernel's unit; rebuild the "
                                  "model (delete its build directory) instead of running it")
        prior = handles.get(sel.symbol)
        if prior is not None and prior != (sel.map_id, sel.variant):
            raise ModelError(f"symbol {sel.symbol} is selected as both {prior[0]}::{prior[1]} and "
                             f"{sel.map_id}::{sel.variant}", path=path, pointer=f"{sel.phase}:{sel.op}")
        handles[sel.symbol] = (sel.map_id, sel.variant)
    return KernelTable(path, dict(sorted(handles.items())))


def check_build(build_dir: str | Path, library: str | Path) -> KernelTable:
    """The boot check of a finished build: its selection_trace.json against the library it produced."""
    trace = Path(build_dir) / "selection_trace.json"
    if not trace.is_file():
        raise ModelError("the build has no selection trace, so its kernels cannot be checked", path=trace,
                         hint="rebuild the model")
    return check_library(library, selection_from_trace(trace))


def selection_from_trace(trace: Any) -> list[Selected]:
    """The selection recorded in a SelectionTrace (or a path to selection_trace.json), in trace order."""
    if not hasattr(trace, "entries"):
        from kernelmap.resolve import SelectionTrace

        trace = SelectionTrace.load(trace)
    out: list[Selected] = []
    for entry in trace.entries:
        chosen = entry.get("selected")
        if not chosen:
            continue
        phase, _, op = str(entry["label"]).partition(":")
        out.append(Selected(phase, op, chosen["provider"], chosen["variant"], chosen["symbol"]))
    return out


def selection_from_graphs(graphs: Mapping[str, Any], registry: Any) -> list[Selected]:
    """The selection of resolved graphs (phase -> Graph), in phase then execution order."""
    out: list[Selected] = []
    for phase in sorted(graphs):
        for op in graphs[phase].ops:
            variant = registry.providers[op.provider].variant(op.variant)
            out.append(Selected(phase, op.label, op.provider, variant.name, variant.symbol))
    return out


def _runnable_units(registry: Any, isa: frozenset[str], only: Iterable[str] | None
                    ) -> tuple[list[CompileUnit], list[str]]:
    """Units of every variant `isa` can run, and the sources maps name that do not exist (left out)."""
    wanted = None if only is None else set(only)
    units: dict[tuple[str, tuple[str, ...]], CompileUnit] = {}
    absent: set[str] = set()
    for pid, provider in sorted(registry.providers.items()):
        if wanted is not None and pid not in wanted:
            continue
        for v in provider.variants:
            if not set(v.requires) <= isa:
                continue
            if not (KERNEL_ROOT / v.source).is_file():
                absent.add(v.source)
                continue
            units.setdefault((v.source, tuple(v.cflags)), CompileUnit(KERNEL_ROOT / v.source, tuple(v.cflags)))
    return [units[k] for k in sorted(units)], sorted(absent)


def build_kernel_library(registry: Any, isa: frozenset[str], *, only: Iterable[str] | None = None) -> Path:
    """Build (or reuse, by content hash) one library of every map's variants this ISA can run.

    `only` restricts it to some map ids (tests). This is the library the fuser probes, so a fused
    kernel that exists is visible whether or not some plan launches it. A variant whose source file
    does not exist is left out, so the probe reports it absent (the binary, not the map, decides).
    """
    units, _absent = _runnable_units(registry, frozenset(isa), only)
    return build_shared(units, name="kmall", target=",".join(sorted(isa)))


def available_kernels(registry: Any, isa: frozenset[str], *, library: str | Path | None = None,
                      only: Iterable[str] | None = None) -> AvailableKernels:
    """Probe `library` (default: the full kernel library for `isa`) for the registry's kernels."""
    path = Path(library) if library is not None else build_kernel_library(registry, isa, only=only)
    absent = () if library is not None else tuple(_runnable_units(registry, frozenset(isa), only)[1])
    exported = probe_library(path)
    found = set()
    for pid, provider in registry.providers.items():
        for v in provider.variants:
            if v.symbol in exported:
                found.add((pid, v.name, v.symbol))
    return AvailableKernels(path, frozenset(found), frozenset(registry.providers), frozenset(isa),
                           absent)
