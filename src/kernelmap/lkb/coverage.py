"""LKB stage, provider check: every (kernel-map provider, variant) belongs to exactly one family point or is residual.

Input: a resolved `Chain`, the kernel-map JSON files (read directly, so the check does not depend on
the map loader) and the kernel sources. Output: a `ProviderCheck` with the assignment, the residual
(in no point), conflicts (in two points), dangling point entries (naming no existing variant), points
that list a class lacking a feature their variant requires, and how every variant and point is
realized, measured from the C (kernelmap.lkb.derive): a copy point must record `reason` and
`evidence`, an instantiation or reference point must not (stale text). It does not judge speed or numerics.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelmap.errors import LKBError
from kernelmap.lkb.derive import SourceShape, classify_source, point_how
from kernelmap.lkb.registry import Chain, Family, Point

__all__ = ["KERNEL_ROOT", "MAPS_DIR", "MapVariant", "ProviderCheck", "check_providers", "family_of", "format_of", "point_requires",
           "read_maps"]

MAPS_DIR = Path(__file__).resolve().parent.parent / "kernel_maps"
KERNEL_ROOT = Path(__file__).resolve().parent.parent / "kernels"


@dataclass(frozen=True)
class MapVariant:
    """One (provider, variant) of a kernel map, with what the LKB needs from it."""

    provider: str
    variant: str
    op: str
    formats: tuple[str, str, str]
    requires: frozenset[str]
    source: str
    symbol: str = ""


@dataclass
class ProviderCheck:
    """The result of `check_providers`; `ok` when nothing conflicts, dangles or is unrealizable."""

    variants: dict[tuple[str, str], MapVariant]
    assigned: dict[tuple[str, str], tuple[str, str]] = field(default_factory=dict)
    residual: list[tuple[str, str]] = field(default_factory=list)
    conflicts: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    dangling: list[tuple[str, str, str]] = field(default_factory=list)
    unrealizable: list[tuple[str, str, list[str]]] = field(default_factory=list)
    shapes: dict[tuple[str, str], SourceShape] = field(default_factory=dict)   # every map variant
    how: dict[str, str] = field(default_factory=dict)                          # point id -> derived how
    unjustified: list[str] = field(default_factory=list)   # copy points without reason and evidence
    stale: list[tuple[str, str]] = field(default_factory=list)   # (point, how) with copy reason/evidence
    kernel_root: Path = KERNEL_ROOT                                              # where the sources were read

    @property
    def ok(self) -> bool:
        return not (self.conflicts or self.dangling or self.unrealizable or self.unjustified or self.stale)

    def lines(self) -> list[str]:
        """Human-readable findings, one per line (empty when every variant is in exactly one point)."""
        out = [f"residual: {p}:{v} is in no family point" for p, v in self.residual]
        out += [f"conflict: {p}:{v} is in points {', '.join(ids)}" for (p, v), ids in sorted(self.conflicts.items())]
        out += [f"dangling: point {pt} names {p}:{v}, which no kernel map declares" for pt, p, v in self.dangling]
        out += [f"unrealizable: point {pt} lists class {c}, which lacks {', '.join(m)}"
                for pt, c, m in self.unrealizable]
        out += [f"unjustified: point {pt} is a copy (measured from its sources) but records no reason and "
                "evidence" for pt in self.unjustified]
        out += [f"stale: point {pt} is {how} (measured from its sources) but still records a copy's reason or "
                "evidence; remove them" for pt, how in self.stale]
        return out


def read_maps(maps_dir: Path | str = MAPS_DIR) -> dict[tuple[str, str], MapVariant]:
    """Every (provider, variant) declared by `<maps_dir>/*.json` (files named in upper case are skipped)."""
    out: dict[tuple[str, str], MapVariant] = {}
    for path in sorted(Path(maps_dir).glob("*.json")):
        if path.stem.isupper():
            continue
        try:
            raw: Any = json.loads(path.read_text(encoding="utf-8"))
            quant = raw.get("quant", {})
            fmt = (quant.get("weight", "none"), quant.get("activation", "none"), quant.get("output", "none"))
            for var in raw["variants"]:
                out[(raw["id"], var["name"])] = MapVariant(raw["id"], var["name"], raw["op"], fmt,
                                                           frozenset(var.get("requires", ())),
                                                           var.get("source", ""), var.get("symbol", ""))
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise LKBError(f"cannot read the kernel map for the LKB check: {exc}", path=path,
                           pointer="/variants", hint="run `kernelmap maps validate`") from exc
    return out


def check_providers(chain: Chain, maps_dir: Path | str = MAPS_DIR, kernel_root: Path | str = KERNEL_ROOT
                    ) -> ProviderCheck:
    """Assign every map variant to the point that names it, across all classes; measure how every variant
    and point is realized from the sources under `kernel_root`; report what does not fit."""
    variants = read_maps(maps_dir)
    root = Path(kernel_root)
    check = ProviderCheck(variants, kernel_root=root)
    check.shapes = {pv: classify_source(v.source, v.symbol, v.variant, root) for pv, v in variants.items()}
    claims: dict[tuple[str, str], set[tuple[str, str]]] = {}
    seen_points: set[Point] = set()
    for _cls, fam, point in chain.all_points():
        key = (fam.id, point.id)
        for pv in point.providers:
            claims.setdefault(pv, set()).add(key)
            if pv not in variants and (point.id, *pv) not in check.dangling:
                check.dangling.append((point.id, *pv))
        if point in seen_points:
            continue
        seen_points.add(point)
        how = point_how(check.shapes[pv] for pv in point.providers if pv in check.shapes)
        check.how[point.id] = how
        if how == "copy" and not (point.reason and point.evidence):
            check.unjustified.append(point.id)
        elif how != "copy" and (point.reason or point.evidence):
            check.stale.append((point.id, how))
        needed = point_requires(point, variants)
        for listed in point.classes:
            lacking = sorted(needed - chain.features(listed))
            if lacking:
                check.unrealizable.append((point.id, listed, lacking))
    for pv in sorted(variants):
        keys = claims.get(pv, set())
        if not keys:
            check.residual.append(pv)
        elif len(keys) > 1:
            check.conflicts[pv] = sorted(f"{f}/{p}" for f, p in keys)
        else:
            check.assigned[pv] = next(iter(keys))
    check.dangling.sort()
    check.unjustified = sorted(set(check.unjustified))
    check.stale = sorted(set(check.stale))
    return check


def format_of(var: MapVariant) -> str:
    """The format key a family's `formats` list uses for this variant (linear: "w*a"; quantizer: output)."""
    weight, act, out = var.formats
    if var.op == "linear":
        return f"{weight}*{act}"
    if var.op == "quantize_act":
        return out
    return weight if weight != "none" else act


def point_requires(point: Point, variants: dict[tuple[str, str], MapVariant]) -> frozenset[str]:
    """Union of the ISA features the point's variants require."""
    out: set[str] = set()
    for pv in point.providers:
        if pv in variants:
            out |= variants[pv].requires
    return frozenset(out)


def family_of(chain: Chain, cls: str, family_id: str) -> Family | None:
    """The family resolved on `cls`, or None."""
    return chain.families(cls).get(family_id)
