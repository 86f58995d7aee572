"""LKB stage, convergence metrics for one class: gap lines per row count, LKB residual, yield, envelope status.

Input: a resolved `Chain`, the provider check, the evidence envelope, an optional step profile and the
campaign ledgers. Output: a JSON-ready report dict (and the text lines `kernelmap lkb` prints). Shares
come only from the profile's measured seconds; without a profile the gap lines say so. It does not
measure anything itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelmap.lkb.campaign import load_ledgers
from kernelmap.lkb.coverage import ProviderCheck, format_of, point_requires
from kernelmap.lkb.derive import lanes_files, line_count
from kernelmap.lkb.evidence import ROWS, Envelope
from kernelmap.lkb.profile import ProfileEntry
from kernelmap.lkb.registry import Chain, Point

__all__ = ["CATEGORIES", "class_lines", "classify", "envelope_status", "gap", "gap_line", "lines_per_class",
           "parameterization_yield", "residual"]

CATEGORIES = ("shared", "shared_unmeasured", "parameterisation", "policy_variant", "novel")


@dataclass(frozen=True)
class Verdict:
    """Where one profiled op falls, and why."""

    category: str
    detail: str


def classify(entry: ProfileEntry, rows: int, cls: str, chain: Chain, check: ProviderCheck,
             env: Envelope) -> Verdict:
    """File one profiled op under a gap category on class `cls` (rules in docs/LKB.md)."""
    pv = (entry.provider, entry.variant)
    var = check.variants.get(pv)
    fams = chain.families(cls)
    key = check.assigned.get(pv)
    if var is None:
        return Verdict("novel", "no kernel map declares this provider variant")
    if key is not None and key[0] in fams:
        family, point_id = key
        covered = any(r.op == var.op and r.family == family and rows in r.rows
                      and (not r.points or point_id in r.points) for r in chain.rules(cls).values())
        point = next((p for p in fams[family].points if p.id == point_id), None)
        if not covered:
            return Verdict("shared_unmeasured", "no rule of this class covers it")
        if point is None:
            return Verdict("shared_unmeasured", f"point {point_id} is not declared on the chain of {cls}")
        note = " (a copy point: LKB residual)" if check.how.get(point_id) == "copy" else ""
        if env.measured(cls, family, point_id, rows):
            return Verdict("shared", f"point {point_id}, measured on {cls}{note}")
        return Verdict("shared_unmeasured", f"point {point_id}, no record on {cls} at C{rows}{note}")
    for fam in fams.values():
        if var.op in fam.ops:
            if format_of(var) in fam.formats:
                return Verdict("parameterisation", f"family {fam.id} has the format but no point for it")
    for fam in fams.values():
        if var.op in fam.ops:
            return Verdict("policy_variant", f"family {fam.id} lacks format {format_of(var)}")
    return Verdict("novel", f"no family implements op {var.op}")


def _percentages(parts: dict[str, float]) -> dict[str, float]:
    """Shares in percent with one decimal that add up to exactly 100.0 (largest remainder)."""
    total = sum(parts.values())
    if total <= 0:
        return {k: 0.0 for k in parts}
    raw = {k: v * 1000.0 / total for k, v in parts.items()}
    floor = {k: int(v) for k, v in raw.items()}
    left = 1000 - sum(floor.values())
    for k in sorted(raw, key=lambda k: (-(raw[k] - floor[k]), CATEGORIES.index(k)))[:left]:
        floor[k] += 1
    return {k: floor[k] / 10.0 for k in parts}


def gap(entries: Sequence[ProfileEntry], rows: int, cls: str, chain: Chain, check: ProviderCheck,
        env: Envelope) -> dict[str, Any]:
    """Seconds and percentages per category for one row count, plus per-op verdicts."""
    seconds = dict.fromkeys(CATEGORIES, 0.0)
    ops = []
    for e in entries:
        v = classify(e, rows, cls, chain, check, env)
        seconds[v.category] += e.seconds
        ops.append({"op": e.op, "provider": e.provider, "variant": e.variant, "seconds": e.seconds,
                    "category": v.category, "detail": v.detail})
    pct = _percentages(seconds)
    return {"rows": rows, "step_seconds": sum(seconds.values()), "seconds": seconds, "percent": pct,
            "line": gap_line(rows, pct), "ops": ops}


def gap_line(rows: int, pct: dict[str, float]) -> str:
    """The gap line of one row count."""
    return (f"C{rows}: shared {pct['shared']:.1f}% (measured on this class), shared-unmeasured "
            f"{pct['shared_unmeasured']:.1f}%, parameterisation {pct['parameterisation']:.1f}%, policy variant "
            f"{pct['policy_variant']:.1f}%, novel {pct['novel']:.1f}% of the step")




def residual(cls: str, chain: Chain, check: ProviderCheck) -> dict[str, Any]:
    """The LKB residual of `cls`, measured from the code: the copy points it realizes (how derived from
    their sources) and every unregistered variant it can run; copies on features only one class has
    form the single-class bucket, counted apart. Instantiations and references are not residual."""
    feats = chain.features(cls)
    root = check.kernel_root
    main: list[dict[str, Any]] = []
    single: list[dict[str, Any]] = []
    inst: list[str] = []
    for fam in chain.families(cls).values():
        for point in fam.points:
            if cls not in point.classes:
                continue
            how = check.how.get(point.id, "copy")
            if how != "copy":
                inst += [point.id] if how == "instantiation" else []
                continue
            sources = sorted({check.variants[pv].source for pv in point.providers if pv in check.variants})
            headers = sorted({h for pv in point.providers if pv in check.shapes for h in check.shapes[pv].isa_headers})
            item = {"point": point.id, "family": fam.id, "how": how, "sources": sources, "headers": headers,
                    "lines": sum(line_count(root / s) for s in sources), "reason": point.reason}
            if len(chain.classes_having(point_requires(point, check.variants))) == 1:
                single.append(item)
            else:
                main.append(item)
    unregistered = []
    for pv in check.residual:
        var = check.variants[pv]
        if var.requires <= feats:
            unregistered.append({"point": None, "provider": pv[0], "variant": pv[1], "how": "unregistered",
                                 "sources": [var.source], "lines": line_count(root / var.source),
                                 "reason": "in no family point"})
    entries = main + unregistered

    def loc(items: list[dict[str, Any]], exclude: frozenset[str] = frozenset()) -> int:
        """Lines of the entries' sources plus each ISA header they include, every file counted once."""
        files = {f for e in items for f in (*e["sources"], *e.get("headers", ()))} - exclude
        return sum(line_count(root / f) for f in files)

    main_files = frozenset(f for e in entries for f in (*e["sources"], *e.get("headers", ())))
    return {"count": len(entries), "loc": loc(entries), "copy_points": len(main),
            "unregistered": len(unregistered), "entries": entries, "instantiation_points": sorted(inst),
            "single_class": {"count": len(single), "loc": loc(single, main_files), "entries": single}}


def class_lines(cls: str, chain: Chain, check: ProviderCheck) -> dict[str, Any]:
    """Lines of C of the variants that run on `cls` (the points it realizes), by kind and file: lanes
    headers (an instantiation's lanes and the ISA headers they include), instantiation files, copies
    (with the ISA headers they include), and the shared code (family bodies, references)."""
    kernel_root = check.kernel_root
    files: dict[str, dict[str, int]] = {k: {} for k in ("lanes", "instantiations", "copies", "bodies", "references")}
    for fam in chain.families(cls).values():
        for point in fam.points:
            if cls not in point.classes:
                continue
            for pv in point.providers:
                shape = check.shapes.get(pv)
                if shape is None:
                    continue
                kind = {"reference": "references", "instantiation": "instantiations"}.get(shape.how, "copies")
                files[kind][shape.source] = shape.lines
                for rel in shape.isa_headers:  # a copy's ISA headers are part of the copy
                    files["copies"][rel] = line_count(kernel_root / rel)
                if shape.how == "instantiation" and shape.lanes and shape.body:
                    for rel in lanes_files(shape.lanes, kernel_root):
                        files["lanes"][rel] = line_count(kernel_root / rel)
                    files["bodies"][shape.body] = line_count(kernel_root / shape.body)
    return {kind: {"lines": sum(f.values()), "files": dict(sorted(f.items()))} for kind, f in files.items()}


def lines_per_class(chain: Chain, check: ProviderCheck) -> list[dict[str, Any]]:
    """Per class of the chain: its class_lines and the lines it added over its ancestors (lanes headers,
    instantiation files and copies no ancestor runs): what adding the class cost in C."""
    out = []
    for name in sorted(chain.classes, key=lambda n: ([c.name for c in chain.lineage(n)], n)):
        own = class_lines(name, chain, check)
        before: set[str] = set()
        for anc in chain.lineage(name)[:-1]:
            got = class_lines(anc.name, chain, check)
            before |= {f for kind in ("lanes", "instantiations", "copies") for f in got[kind]["files"]}
        added = {kind: {f: n for f, n in own[kind]["files"].items() if f not in before}
                 for kind in ("lanes", "instantiations", "copies")}
        out.append({"class": name, "lines": own,
                    "added": {kind: {"lines": sum(f.values()), "files": f} for kind, f in added.items()},
                    "added_total": sum(sum(f.values()) for f in added.values())})
    return out


def envelope_status(cls: str, chain: Chain, env: Envelope) -> list[dict[str, Any]]:
    """Per family: the row counts at which every point `cls` realizes has a record on `cls`, and which are measured.

    Status: inside (every realized point at C1, C16 and C128), partial (some record), outside (none).
    """
    out = []
    for fam in chain.families(cls).values():
        points: list[Point] = [p for p in fam.points if cls in p.classes]
        inside = [r for r in ROWS if points and all(env.measured(cls, fam.id, p.id, r) for p in points)]
        measured = [p.id for p in points if any(env.measured(cls, fam.id, p.id, r) for r in ROWS)]
        status = "inside" if len(inside) == len(ROWS) else ("partial" if measured else "outside")
        out.append({"family": fam.id, "points_on_class": len(points), "measured_points": measured,
                    "inside_rows": inside, "status": status})
    return out


def parameterization_yield(folder: Path | None = None) -> dict[str, Any]:
    """Lines deleted by parameterization and items promoted, summed over exited campaigns."""
    ledgers = load_ledgers(folder) if folder is not None else load_ledgers()
    deleted, promoted = 0, []
    for ledger in ledgers:
        end = ledger.get("exit")
        if not end:
            continue
        try:
            deleted += max(0, int(ledger["start"]["residual_loc"]) - int(end["residual_loc"]))
        except (KeyError, TypeError, ValueError):
            pass
        promoted += [str(p) for p in end.get("promoted", [])]
    return {"lines_deleted": deleted, "promoted": promoted, "campaigns": len(ledgers)}
