"""Bench/probe helper: the kernel maps as plain (id, raw JSON, variants) records, from the registry.

Input: the validated registry (`kernelmap.maps.load_registry`) when it is importable, else the JSON
files in src/kernelmap/kernel_maps/ read directly (an adapter until the registry lands). Output:
`BenchProvider` records with the attributes the probe and the bench use. It does not validate maps.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelmap.build.driver import KERNEL_ROOT
from kernelmap.errors import MapError

__all__ = ["BenchProvider", "BenchVariant", "MAPS_DIR", "ProviderTable", "load_providers"]

MAPS_DIR = KERNEL_ROOT.parent / "kernel_maps"


@dataclass(frozen=True)
class BenchVariant:
    """One variant of a provider: name, C symbol, source (relative to the kernel root), ISA, flags."""

    name: str
    symbol: str
    source: str
    requires: tuple[str, ...]
    cflags: tuple[str, ...]
    priority: int


@dataclass(frozen=True)
class BenchProvider:
    """A provider as the bench sees it: id, op, interface, raw map dict, variants."""

    id: str
    op: str
    interface: str
    path: Path
    raw: dict[str, Any]
    variants: tuple[BenchVariant, ...]


@dataclass(frozen=True)
class ProviderTable:
    """A registry-shaped view (`.providers`: id -> provider) for kernelmap.build.probe."""

    providers: dict[str, BenchProvider]


def _record(raw: dict[str, Any], path: Path) -> BenchProvider:
    try:
        variants = tuple(
            BenchVariant(v["name"], v["symbol"], v["source"], tuple(v.get("requires", ())),
                         tuple(v.get("cflags", ())), int(v.get("priority", 0)))
            for v in raw["variants"])
        return BenchProvider(raw["id"], raw["op"], raw.get("interface", ""), path, raw, variants)
    except (KeyError, TypeError, ValueError) as exc:
        raise MapError(f"map lacks a field the bench needs: {exc}", path=path, pointer="/variants",
                       hint="run `kernelmap maps validate`") from exc


def _from_json(dirs: Sequence[Path]) -> list[BenchProvider]:
    out = []
    for folder in dirs:
        for path in sorted(Path(folder).glob("*.json")):
            if path.name.isupper() or path.stem.isupper():
                continue
            try:
                raw = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                raise MapError(f"cannot read kernel map: {exc}", path=path) from exc
            if isinstance(raw, dict) and "variants" in raw:
                out.append(_record(raw, path))
    return out


def load_providers(extra_dirs: Sequence[Path] = ()) -> list[BenchProvider]:
    """Every provider, sorted by id: through the validated registry when available, else raw JSON."""
    try:
        from kernelmap.maps import load_registry  # type: ignore[attr-defined]
    except ImportError:
        providers = _from_json([MAPS_DIR, *extra_dirs])
    else:
        registry = load_registry(extra_dirs=tuple(extra_dirs))
        providers = [_record(dict(p.raw), Path(p.path)) for p in registry.providers.values()]
    return sorted(providers, key=lambda p: p.id)
