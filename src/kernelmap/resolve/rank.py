"""Resolve stage, steps 3-4: rank the survivors of the filter and fail closed.

Input: survivors (sorted by id), the rejection rows and optionally the CPU class's evidence. Output:
the chosen provider and variant plus ranked rows, or a ResolutionError. Order: lifecycle (production
first), then whether the survivor can run more than its scalar oracle here (a survivor whose only
eligible variant is "ref" ranks after every survivor with a SIMD variant for this CPU: priority says
which provider is faster as written, and a provider whose SIMD variants the CPU lacks is not), then
priority (only inside one equivalence group: survivors spanning groups are a fault whatever their
priorities), then the best eligible variant: the one the class's evidence shows faster
than every other beyond noise at this shape and row count (variants of one provider compute the same
bits, so this only changes speed), else by variant priority. The selected row records which decided
(`variant_by`: evidence | priority, with the measured ranges or why evidence did not decide). Any tie
is a fault; file order never decides.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from kernelmap.errors import ResolutionError
from kernelmap.maps.provider import Provider, Variant
from kernelmap.resolve.filter import STAGE_INDEX, Survivor, failed_checks, row
from kernelmap.resolve.request import Request

if TYPE_CHECKING:
    from kernelmap.lkb.evidence import VariantChoice, VariantEvidence

__all__ = ["rank"]


def _ref_only(s: Survivor) -> bool:
    """True when the only variant of `s` this CPU can run is its scalar oracle."""
    return all(v.name == "ref" for v in s.variants)


def _standing(s: Survivor) -> tuple[int, bool, int]:
    """What ranks survivors of one group (lower first); equal standings are a tie."""
    return (s.provider.lifecycle, _ref_only(s), -s.provider.priority)


def _key(s: Survivor) -> tuple[int, bool, int, str]:
    return (*_standing(s), s.provider.id)


def _others(rows: Sequence[dict[str, Any]]) -> str:
    """How many candidates the filters rejected (for the fault messages of the rank step)."""
    n = sum(1 for r in rows if "variant" not in r and r["stage"] != "rank")
    return f"; {n} other candidate{'s' if n != 1 else ''} rejected" if n else ""


def _hint(req: Request) -> str:
    return f"run `kernelmap explain --op {req.label}` to see every candidate and why it was rejected"


def _rows_of(req: Request) -> int:
    """The row count a request runs at: M itself, or the top of its run-time range (a full prefill chunk)."""
    m = req.dims.get("M", 1)
    return int(m[1]) if isinstance(m, tuple) else int(m)


def _evidence_choice(req: Request, provider: Provider, variants: Sequence[Variant],
                     evidence: VariantEvidence) -> VariantChoice:
    from kernelmap.lkb.evidence import VariantChoice, bench_shape

    if provider.id not in evidence.providers:
        return VariantChoice(None, f"no evidence ({evidence.source} has fewer than two measured variants of "
                                   f"{provider.id})")
    dims = {k: v for k, v in req.dims.items() if not isinstance(v, tuple)}
    weight = next((req.ports[p.name][0] for p in provider.weights if p.name in req.ports), None)
    shape = bench_shape(provider.interface, dims, weight)
    return evidence.choose(provider.id, [v.name for v in variants], shape, _rows_of(req))


def rank(req: Request, survivors: Sequence[Survivor], rows: list[dict[str, Any]],
         providers: Mapping[str, Provider], evidence: VariantEvidence | None = None
         ) -> tuple[Provider, Variant, list[dict[str, Any]]]:
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
    ordered = sorted(survivors, key=_key)
    top = ordered[0].provider
    if len(ordered) > 1:
        if _standing(ordered[1]) == _standing(ordered[0]):
            tied = [s for s in ordered if _standing(s) == _standing(ordered[0])]
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
    variants = tuple(winner.variants)
    if len(variants) > 1 and variants[0].priority == variants[1].priority:
        raise ResolutionError(
            f"provider {top.id}: variants {variants[0].name} and {variants[1].name} tie at priority "
            f"{variants[0].priority}", path=req.label, hint="give variants distinct priorities")
    choice = None
    if evidence is not None and len(variants) > 1:
        choice = _evidence_choice(req, top, variants, evidence)
    by_evidence = choice is not None and choice.winner is not None
    if by_evidence:
        variants = (*(v for v in variants if v.name == choice.winner),
                    *(v for v in variants if v.name != choice.winner))
    for i, s in enumerate(ordered):
        notes = [("unchecked: " + ", ".join(s.unchecked))] if s.unchecked else []
        if i > 0 and _ref_only(s) and not _ref_only(ordered[0]):
            notes.append("only its ref runs on this CPU: ranked after providers with a SIMD variant")
        extra: dict[str, str] = {}
        if i == 0 and choice is not None:
            extra["variant_by"] = "evidence" if by_evidence else "priority"
            extra["evidence"] = choice.reason
            notes.append(f"variant by {extra['variant_by']}: {choice.reason}")
        r = row(s.provider, "selected" if i == 0 else "ranked", "rank", rank=i,
                variant=variants[0].name if i == 0 else s.variants[0].name,
                detail="; ".join(notes) if notes else None)
        rows.append({**r, **extra})
    for j, v in enumerate(variants[1:], start=1):
        why = ("slower by evidence" if by_evidence
               else f"variant priority {v.priority} < {variants[0].priority}")
        rows.append(row(top, "ranked", "variant_rank", rank=j, variant=v.name, detail=why))
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
