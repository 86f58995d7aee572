"""Map stage: a directory of kernel maps (plus extra dirs) -> one immutable, content-hashed Registry.

Loads every `*.json` map, refuses duplicate ids and equal-priority production providers of one
equivalence group whose phases overlap (naming both files), and hashes the catalogue. The result
never depends on file or directory order. It does not choose providers (resolve/ does).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from pathlib import Path

from kernelmap.errors import MapError
from kernelmap.maps.loader import load_map
from kernelmap.maps.provider import Provider

__all__ = ["callees", "MAPS_DIR", "Registry", "load_registry"]

MAPS_DIR = Path(__file__).resolve().parent.parent / "kernel_maps"
KERNEL_ROOT = Path(__file__).resolve().parent.parent / "kernels"


class Registry:
    """All providers, by id (sorted) and by op, with one hash over the sorted (id, sha256) pairs."""

    def __init__(self, providers: Iterable[Provider]) -> None:
        by_id: dict[str, Provider] = {}
        for p in sorted(providers, key=lambda p: (p.id, str(p.path))):
            if p.id in by_id:
                first, second = sorted([str(by_id[p.id].path), str(p.path)])
                raise MapError(f"duplicate map id \"{p.id}\" (also in {second})", path=first, pointer="/id",
                               hint="map ids are unique across all map directories")
            by_id[p.id] = p
        self.providers: dict[str, Provider] = by_id
        ops: dict[str, list[Provider]] = {}
        for p in by_id.values():
            ops.setdefault(p.op, []).append(p)
        self._by_op: dict[str, tuple[Provider, ...]] = {op: tuple(v) for op, v in sorted(ops.items())}
        _check_ties(self._by_op)
        _check_calls(by_id)
        h = hashlib.sha256(b"kernelmap.registry/1\0")
        for pid, p in by_id.items():
            h.update(pid.encode() + b"\0" + p.sha256.encode() + b"\0")
        self.hash: str = h.hexdigest()
        self._cache: dict[str, object] = {}

    def by_op(self, op: str) -> tuple[Provider, ...]:
        """Providers implementing `op`, sorted by id (empty if none)."""
        return self._by_op.get(op, ())

    @property
    def ops(self) -> tuple[str, ...]:
        """Every op some provider implements, sorted."""
        return tuple(self._by_op)

    def __len__(self) -> int:
        return len(self.providers)

    def __contains__(self, pid: object) -> bool:
        return pid in self.providers


def _check_ties(by_op: dict[str, tuple[Provider, ...]]) -> None:
    """Equal-priority production providers in one group with overlapping phases are refused."""
    for providers in by_op.values():
        prod = [p for p in providers if p.status == "production"]
        for i, a in enumerate(prod):
            for b in prod[i + 1:]:
                if a.group == b.group and a.priority == b.priority and a.phases & b.phases:
                    first, second = sorted([str(a.path), str(b.path)])
                    shared = ", ".join(sorted(a.phases & b.phases))
                    raise MapError(
                        f"production providers \"{a.id}\" and \"{b.id}\" tie at priority {a.priority} in "
                        f"group {a.group} for phase {shared} (other file: {second})",
                        path=first, pointer="/selection/priority",
                        hint="give one a different priority, split their phases, or demote one to candidate")


def callees(provider: Provider, registry: Registry, variant: str) -> list[tuple[Provider, str]]:
    """(provider, variant name) of every kernel the `variant` of `provider` calls (its map's `calls`:
    each callee's variant of the same name, checked to exist when the registry loads)."""
    return [(registry.providers[cid], variant) for cid in provider.raw.get("calls", ())]


def _check_calls(by_id: dict[str, Provider]) -> None:
    """A map's `calls` name other maps whose variants match its own by name, requires and cflags (so the
    callee a variant needs is runnable exactly where the variant is) and which call nothing themselves."""
    for p in by_id.values():
        for i, cid in enumerate(p.raw.get("calls", ())):
            pointer = f"/calls/{i}"
            callee = by_id.get(cid)
            if callee is None or callee.id == p.id:
                raise MapError("calls a map that is not in the registry" if callee is None else "calls itself",
                               path=p.path, pointer=pointer, value=cid)
            if callee.raw.get("calls"):
                raise MapError("calls a map that calls others (one level only)", path=p.path, pointer=pointer,
                               value=cid)
            theirs = {v.name: v for v in callee.variants}
            for v in p.variants:
                w = theirs.get(v.name)
                if w is None or w.requires != v.requires or tuple(w.cflags) != tuple(v.cflags):
                    raise MapError(f"variant \"{v.name}\" has no twin in the called map {cid} (same name, "
                                   "requires and cflags)", path=p.path, pointer=pointer, value=cid,
                                   expected=sorted(theirs))


def _map_files(dirs: Sequence[Path]) -> list[Path]:
    files: list[Path] = []
    for d in dirs:
        if d == MAPS_DIR and not d.exists():
            continue
        if not d.is_dir():
            raise MapError("maps directory not found", path=d)
        files.extend(sorted(f for f in d.glob("*.json") if f.is_file()))
    return files


def load_registry(extra_dirs: Sequence[Path | str] = (), *, builtin: bool = True,
                  kernel_root: Path | str | None = KERNEL_ROOT, trusted: bool = True) -> Registry:
    """Load the package's kernel_maps/ (unless builtin=False) plus `extra_dirs` into a Registry.

    `kernel_root` is where map sources must exist (None skips that check, for what-if map dirs); `trusted`
    False schema-checks every map even when its bytes passed before (loader.py's module docstring).
    """
    dirs = ([MAPS_DIR] if builtin else []) + [Path(d) for d in extra_dirs]
    root = Path(kernel_root) if kernel_root is not None else None
    return Registry(load_map(f, kernel_root=root, trusted=trusted) for f in _map_files(dirs))
