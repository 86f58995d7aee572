"""Resolve stage, step 2: filter the gathered providers of one op against one request.

Input: a `Request` and the providers of its op (sorted by id). Output: the survivors (each with its
eligible variants) and one trace row per rejection, with a stage and a reason code. Checks run in
the fixed order of KERNEL_MAPS.md section 3: status, phase, interface, contract, port dtype, port
layout, port presence, constraints, ISA (per variant), alias safety. It does not rank (rank.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kernelmap.maps.provider import Constraint, Provider, Variant
from kernelmap.resolve.request import Request

__all__ = ["STAGES", "Survivor", "failed_checks", "filter_providers", "row"]

# Stage order; the index says how far a rejected candidate got (the "closest" one got furthest).
STAGES = ("status", "phase", "interface", "contract", "dtype", "layout", "port", "constraint", "isa",
          "alias", "rank")
STAGE_INDEX = {s: i for i, s in enumerate(STAGES)}


@dataclass(frozen=True)
class Survivor:
    """A provider that passed every filter, its eligible variants and the checks it could not make."""

    provider: Provider
    variants: tuple[Variant, ...]
    unchecked: tuple[str, ...]


def row(p: Provider, decision: str, stage: str, *, reason: str | None = None, rank: int | None = None,
        variant: str | None = None, detail: str | None = None) -> dict[str, Any]:
    """One trace row (keys absent when not applicable, so the JSON stays minimal and stable)."""
    out: dict[str, Any] = {"provider": p.id, "decision": decision, "stage": stage, "status": p.status,
                           "priority": p.priority, "equivalence_group": p.group}
    if reason is not None:
        out["reason"] = reason
    if rank is not None:
        out["rank"] = rank
    if variant is not None:
        out["variant"] = variant
    if detail is not None:
        out["detail"] = detail
    return out


def _constraints(cons: Sequence[Constraint], dims: Any, unchecked: list[str]) -> Constraint | None:
    """The first failing constraint (None if all pass); unbound ones are appended to `unchecked`."""
    for c in cons:
        ok = c.check(dims)
        if ok is None:
            unchecked.append(f"constraint:{c.text}")
        elif not ok:
            return c
    return None


_Rejection = tuple[str, str, str]


def _check(req: Request, p: Provider) -> tuple[_Rejection | None, Survivor | None, list[dict]]:
    """All checks for one provider: (rejection as (stage, reason, detail) or None, survivor, variant rows)."""
    rej = _check_provider(req, p)
    if rej is not None:
        return rej, None, []
    unchecked: list[str] = [f"port:{n}" for n in p.ports if n not in req.ports]
    failed = _constraints(p.constraints, req.dims, unchecked)
    if failed is not None:
        return (("constraint", f"constraint_failed:{failed.dim}:{failed.rule}",
                 f"{failed.text} fails for {failed.dim}={req.dims[failed.dim]}"), None, [])
    return _check_variants(req, p, unchecked)


def _check_provider(req: Request, p: Provider) -> _Rejection | None:
    """Status, phase, interface, contract and port checks."""
    if p.status not in req.allow_status:
        return ("status", f"status_not_production:{p.status}",
                f"status {p.status} is not allowed (allowed: {', '.join(sorted(req.allow_status))})")
    if req.phase not in p.phases:
        return ("phase", "phase_mismatch", f"phases {', '.join(sorted(p.phases))}; request {req.phase}")
    if req.interface is not None and req.interface != p.interface:
        return ("interface", "interface_mismatch", f"interface {p.interface}; request {req.interface}")
    if req.contract is not None and req.contract != p.contract:
        return ("contract", "contract_mismatch", f"contract {p.contract}; request {req.contract}")
    ports = p.ports
    for name, (dtype, _layout) in req.ports.items():
        port = ports.get(name)
        if port is not None and port.dtype != dtype:
            return ("dtype", f"dtype_mismatch:{name}", f"port {name} is {port.dtype}; request {dtype}")
    for name, (_dtype, layout) in req.ports.items():
        port = ports.get(name)
        if port is not None and port.layout != layout:
            return ("layout", f"layout_mismatch:{name}", f"port {name} is {port.layout}; request {layout}")
    for name in req.ports:
        if name not in ports:
            return ("port", f"port_missing:{name}",
                    f"provider has no port {name} (ports: {', '.join(sorted(ports))})")
    return None


def _check_variants(req: Request, p: Provider,
                    unchecked: list[str]) -> tuple[_Rejection | None, Survivor | None, list[dict]]:
    """ISA and variant constraints per variant, then alias safety."""
    ports = p.ports
    eligible: list[Variant] = []
    vrows: list[dict] = []
    best_missing: tuple[int, int, str, str] | None = None
    cons_fail: tuple[str, str] | None = None
    isa = req.isa
    for v in p.variants:
        missing = v.requires - isa
        if missing:
            feat = min(missing)
            vrows.append(row(p, "rejected", "isa", reason=f"isa_unavailable:{feat}", variant=v.name,
                             detail=f"variant {v.name} needs {', '.join(sorted(missing))}"))
            key = (len(missing), -v.priority, feat, v.name)
            if best_missing is None or key < best_missing:
                best_missing = key
            continue
        vun: list[str] = []
        vfail = _constraints(v.constraints, req.dims, vun)
        if vfail is not None:
            reason = f"constraint_failed:{vfail.dim}:{vfail.rule}"
            detail = f"variant {v.name}: {vfail.text} fails for {vfail.dim}={req.dims[vfail.dim]}"
            vrows.append(row(p, "rejected", "constraint", reason=reason, variant=v.name, detail=detail))
            if cons_fail is None:
                cons_fail = (reason, detail)
            continue
        unchecked.extend(f"variant {v.name} {u}" for u in vun)
        eligible.append(v)
    if not eligible:
        # A missing ISA feature is the actionable reason (another machine could run it), so it wins.
        if best_missing is not None:
            return (("isa", f"isa_unavailable:{best_missing[2]}",
                     f"no variant runs on isa [{', '.join(sorted(isa))}]"), None, vrows)
        assert cons_fail is not None
        return ("constraint", cons_fail[0], cons_fail[1] + "; no other variant is eligible"), None, vrows
    for out_port, in_port in sorted(req.aliases):
        port = ports.get(out_port)
        if port is None or port.role != "output" or f"input:{in_port}" not in port.may_alias:
            return (("alias", f"alias_unsafe:{out_port}",
                     f"output {out_port} may not alias input {in_port} "
                     f"(declared may_alias: {', '.join(port.may_alias) if port else 'no such output'})"),
                    None, [])
    eligible.sort(key=lambda v: -v.priority)
    return None, Survivor(p, tuple(eligible), tuple(unchecked)), vrows


def filter_providers(req: Request, providers: Sequence[Provider]) -> tuple[list[Survivor], list[dict]]:
    """Apply every filter; return survivors and the rows of every rejected provider or variant."""
    survivors: list[Survivor] = []
    rows: list[dict] = []
    for p in providers:
        rej, survivor, vrows = _check(req, p)
        if rej is not None:
            stage, reason, detail = rej
            rows.append(row(p, "rejected", stage, reason=reason, detail=detail))
        else:
            survivors.append(survivor)
        rows.extend(vrows)
    return survivors, rows


def failed_checks(req: Request, p: Provider) -> list[str]:
    """Every reason code `p` fails for `req`, without stopping at the first (used to name the closest)."""
    out: list[str] = []
    if p.status not in req.allow_status:
        out.append(f"status_not_production:{p.status}")
    if req.phase not in p.phases:
        out.append("phase_mismatch")
    if req.interface is not None and req.interface != p.interface:
        out.append("interface_mismatch")
    if req.contract is not None and req.contract != p.contract:
        out.append("contract_mismatch")
    for name, (dtype, layout) in req.ports.items():
        port = p.ports.get(name)
        if port is None:
            out.append(f"port_missing:{name}")
            continue
        if port.dtype != dtype:
            out.append(f"dtype_mismatch:{name}")
        if port.layout != layout:
            out.append(f"layout_mismatch:{name}")
    failed = _constraints(p.constraints, req.dims, [])
    if failed is not None:
        out.append(f"constraint_failed:{failed.dim}:{failed.rule}")
    if not any(not (v.requires - req.isa) for v in p.variants):
        out.append("isa_unavailable")
    for out_port, in_port in sorted(req.aliases):
        port = p.ports.get(out_port)
        if port is None or f"input:{in_port}" not in port.may_alias:
            out.append(f"alias_unsafe:{out_port}")
    return out
