"""Resolve stage, steps 3-4: rank the survivors of the filter and fail closed.

Input: survivors (sorted by id) and the rejection rows. Output: the chosen provider and variant plus
ranked rows, or a ResolutionError. Order: lifecycle (production first), then priority (only inside
one equivalence group: survivors spanning groups are a fault whatever their priorities), then the
best eligible variant by variant priority. Any tie is a fault; file order never decides.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kernelmap.errors import ResolutionError
from kernelmap.maps.provider import Provider, Variant
from kernelmap.resolve.filter import STAGE_INDEX, Survivor, failed_checks, row
from kernelmap.resolve.request import Request

__all__ = ["rank"]


def _key(p: Provider) -> tuple[int, int, str]:
    return (p.lifecycle, -p.priority, p.id)


def _others(rows: Sequence[dict[str, Any]]) -> str:
    """How many candidates the filters rejected (for the fault messages of the rank step)."""
    n = sum(1 for r in rows if "variant" not in r and r["stage"] != "rank")
    return f"; {n} other candidate{'s' if n != 1 else ''} rejected" if n else ""


def _hint(req: Request) -> str:
    return f"run `kernelmap explain --op {req.label}` to see every candidate and why it was rejected"


def rank(req: Request, survivors: Sequence[Survivor], rows: list[dict[str, Any]],
         providers: Mapping[str, Provider]) -> tuple[Provider, Variant, list[dict[str, Any]]]:
    """Choose one survivor and its variant; append ranked rows; raise ResolutionError on any fault."""
    if not survivors:
        raise ResolutionError(_no_survivor_message(req, rows, providers), path=req.label, hint=_hint(req))
    groups = sorted({s.provider.group for s in survivors})
    if len(groups) > 1:
        listing = "; ".join(f"{s.provider.id} ({s.provider.group}, priority {s.provider.priority})"
                            for s in sorted(survivors, key=lambda s: s.provider.id))
        for s in survivors:
            rows.append(row(s.provider, "rejected", "rank", reason="group_conflict",
                            detail=f"survivors span {len(groups)} equivalence groups"))
        raise ResolutionError(
            f"op {req.op} in phase {req.phase}: {len(survivors)} survivors span {len(groups)} equivalence "
            f"groups ({listing}); priority never chooses between contracts{_others(rows)}",
            path=req.label, hint="request a contract (numerics policy) or retire one provider; " + _hint(req))
    ordered = sorted(survivors, key=lambda s: _key(s.provider))
    top = ordered[0].provider
    if len(ordered) > 1:
        second = ordered[1].provider
        if (second.lifecycle, second.priority) == (top.lifecycle, top.priority):
            tied = [s for s in ordered if (s.provider.lifecycle, s.provider.priority)
                    == (top.lifecycle, top.priority)]
            for s in ordered:
                reason = "priority_tie" if any(s is t for t in tied) else "outranked"
                rows.append(row(s.provider, "rejected", "rank", reason=reason,
                                detail=f"{len(tied)} {top.status} providers tie at priority {top.priority}"))
            raise ResolutionError(
                f"op {req.op} in phase {req.phase}: {top.status} providers "
                f"{', '.join(s.provider.id for s in tied)} tie at priority {top.priority} in group {top.group}"
                f"{_others(rows)}",
                path=req.label, hint="give them distinct priorities; " + _hint(req))
    winner = ordered[0]
    variants = winner.variants
    if len(variants) > 1 and variants[0].priority == variants[1].priority:
        raise ResolutionError(
            f"provider {top.id}: variants {variants[0].name} and {variants[1].name} tie at priority "
            f"{variants[0].priority}", path=req.label, hint="give variants distinct priorities")
    for i, s in enumerate(ordered):
        detail = ("unchecked: " + ", ".join(s.unchecked)) if s.unchecked else None
        rows.append(row(s.provider, "selected" if i == 0 else "ranked", "rank", rank=i,
                        variant=s.variants[0].name, detail=detail))
    for j, v in enumerate(variants[1:], start=1):
        rows.append(row(top, "ranked", "variant_rank", rank=j, variant=v.name,
                        detail=f"variant priority {v.priority} < {variants[0].priority}"))
    return top, variants[0], rows


def _no_survivor_message(req: Request, rows: Sequence[dict[str, Any]],
                         providers: Mapping[str, Provider]) -> str:
    prov_rows = [r for r in rows if "variant" not in r]
    n = len(prov_rows)
    if n == 0:
        return f"no provider implements op {req.op}"
    # The closest candidate fails the fewest checks; then it got furthest; then lifecycle, priority, id.
    # Visit in tie-break order: the first one failing a single check cannot be beaten.
    def order(r: dict[str, Any]) -> tuple[Any, ...]:
        p = providers[r["provider"]]
        return (-STAGE_INDEX.get(r["stage"], 0), p.lifecycle, -p.priority, p.id)

    best, best_n = None, None
    for r in sorted(prov_rows, key=order):
        n_failed = len(failed_checks(req, providers[r["provider"]]))
        if best_n is None or n_failed < best_n:
            best, best_n = r, n_failed
            if n_failed <= 1:
                break
    assert best is not None
    return (f"no provider for op {req.op} in phase {req.phase}: {n} candidate"
            f"{'s' if n != 1 else ''} rejected; closest {best['provider']}: {best['reason']}"
            + (f" [{best['detail']}]" if best.get("detail") else ""))
