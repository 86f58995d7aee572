"""Resolve stage, step 2: filter the gathered providers of one op against one request.

Input: a `Request` and the providers of its op (sorted by id). Output: the survivors (each with its
eligible variants) and one trace row per rejection, with a stage and a reason code. Checks run in
the fixed order of KERNEL_MAPS.md section 3: status, phase, interface, contract, port dtype, port
layout, port presence, constraints, ISA (per variant), alias safety. It does not rank (rank.py).
A weight port's layout is negotiable: it passes when it is the requested (GGUF) layout or a repacked
layout the packer makes from it for that dtype (weights/repack.py; weights are packed after resolution,
in the layout of the selected provider's port). Activation and state layouts must match exactly.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kernelmap.maps.expr import Bound, show_bound
from kernelmap.maps.provider import FAILED, UNEVALUABLE, Constraint, Port, Provider, Variant
from kernelmap.resolve.request import Request
from kernelmap.weights.repack import derivable

__all__ = ["STAGES", "Survivor", "failed_checks", "filter_providers", "layout_accepts", "prefilter", "row"]

# Stage order; the index says how far a rejected candidate got (the "closest" one got furthest).
STAGES = ("status", "phase", "interface", "contract", "dtype", "layout", "port", "constraint", "isa",
          "alias", "rank")
STAGE_INDEX = {s: i for i, s in enumerate(STAGES)}

_Rejection = tuple[str, str, str]


@dataclass(frozen=True)
class Survivor:
    """A provider that passed every filter, its eligible variants and the provider ports the request did
    not name (listed as unchecked: only ports may go unchecked; constraints never do)."""

    provider: Provider
    variants: tuple[Variant, ...]
    unchecked: tuple[str, ...]


def layout_accepts(port: Port, dtype: str, layout: str) -> bool:
    """True when `port` can read a `dtype` buffer the request holds in `layout` (see the module doc)."""
    return port.layout == layout or (port.storage == "weight" and derivable(port.layout, layout, dtype))


def row(p: Provider, decision: str, stage: str, *, reason: str | None = None, rank: int | None = None,
        variant: str | None = None, detail: str | None = None) -> dict[str, Any]:
    """One trace row (keys absent when not applicable, so the JSON stays minimal and stable)."""
    out = dict(p.base_row)
    out["decision"] = decision
    out["stage"] = stage
    if reason is not None:
        out["reason"] = reason
    if rank is not None:
        out["rank"] = rank
    if variant is not None:
        out["variant"] = variant
    if detail is not None:
        out["detail"] = detail
    return out


def prefilter(providers: Sequence[Provider], req: Request) -> tuple[tuple[dict[str, Any], ...],
                                                                    tuple[Provider, ...]]:
    """Status, phase, interface and contract checks: rows for the rejected, and the rest.

    These depend only on (op, phase, allow_status, interface, contract), so the resolver caches the
    result per key and each request examines only the providers of its contract.
    """
    rows = []
    rest = []
    allowed = ", ".join(sorted(req.allow_status))
    phase, interface, contract = req.phase, req.interface, req.contract
    for p in providers:
        if p.status not in req.allow_status:
            rows.append(row(p, "rejected", "status", reason=f"status_not_production:{p.status}",
                            detail=f"status {p.status} is not allowed (allowed: {allowed})"))
        elif phase not in p.phases:
            rows.append(row(p, "rejected", "phase", reason="phase_mismatch",
                            detail=f"phases {', '.join(sorted(p.phases))}; request {phase}"))
        elif interface is not None and interface != p.interface:
            rows.append(row(p, "rejected", "interface", reason="interface_mismatch",
                            detail=f"interface {p.interface}; request {interface}"))
        elif contract is not None and contract != p.contract:
            rows.append(row(p, "rejected", "contract", reason="contract_mismatch",
                            detail=f"contract {p.contract}; request {contract}"))
        else:
            rest.append(p)
    return tuple(rows), tuple(rest)


def _constraints(cons: Sequence[Constraint], dims: Mapping[str, Bound]) -> tuple[str, str, str] | None:
    """The first constraint that fails or cannot be evaluated, as (stage, reason, detail); None if all hold.

    Fail closed: a constraint the resolver cannot evaluate (a dim the request does not give, a bound
    dividing by zero or not an integer) rejects like a failing one, with its own reason code.
    """
    for c in cons:
        verdict, why = c.check(dims)
        if verdict == FAILED:
            ranged = [n for n in sorted(c.value.names | {c.dim}) if isinstance(dims.get(n), tuple)]
            runtime = "; ".join(f"{n} takes {show_bound(dims[n])} at run time" for n in ranged)
            return ("constraint", f"constraint_failed:{c.dim}:{c.rule}",
                    f"{c.text} fails for {why}" + (f" ({runtime})" if runtime else ""))
        if verdict == UNEVALUABLE:
            return ("constraint", f"constraint_unevaluable:{c.dim}:{c.rule}", f"{c.text} cannot be checked: {why}")
    return None


def _check_ports(req: Request, p: Provider) -> _Rejection | None:
    """Port dtype, layout and presence checks (the earlier stages were done by `prefilter`)."""
    ports = p.ports
    items = req.port_items
    for name, (dtype, _layout) in items:
        port = ports.get(name)
        if port is not None and port.dtype != dtype:
            return ("dtype", f"dtype_mismatch:{name}", f"port {name} is {port.dtype}; request {dtype}")
    for name, (dtype, layout) in items:
        port = ports.get(name)
        if port is not None and not layout_accepts(port, dtype, layout):
            return ("layout", f"layout_mismatch:{name}", f"port {name} is {port.layout}; request {layout}")
    for name, _spec in items:
        if name not in ports:
            return ("port", f"port_missing:{name}", f"provider has no port {name} (ports: {', '.join(ports)})")
    return None


def _isa_split(p: Provider, isa: frozenset[str]) -> tuple[tuple[Variant, ...], tuple[dict, ...], str | None]:
    """Variants runnable on `isa` (best first), rows for the others, and the most actionable missing
    feature (from the variant missing the fewest). Depends only on (provider, isa): cached on the provider."""
    hit = p.isa_cache.get(isa)
    if hit is not None:
        return hit
    runnable: list[Variant] = []
    vrows: list[dict] = []
    best: tuple[int, int, str, str] | None = None
    for v in p.ranked_variants:
        missing = v.requires - isa
        if missing:
            feat = min(missing)
            vrows.append(row(p, "rejected", "isa", reason=f"isa_unavailable:{feat}", variant=v.name,
                             detail=f"variant {v.name} needs {', '.join(sorted(missing))}"))
            key = (len(missing), -v.priority, feat, v.name)
            if best is None or key < best:
                best = key
        else:
            runnable.append(v)
    hit = p.isa_cache[isa] = (tuple(runnable), tuple(vrows), best[2] if best else None)
    return hit


def _check_variants(req: Request, p: Provider,
                    unchecked: list[str]) -> tuple[_Rejection | None, Survivor | None, list[dict]]:
    """ISA and variant constraints per variant, then alias safety."""
    runnable, isa_rows, missing_feat = _isa_split(p, req.isa)
    vrows: list[dict] = list(isa_rows)
    eligible: list[Variant] = []
    cons_fail: tuple[str, str] | None = None
    for v in runnable:
        if v.constraints:
            vfail = _constraints(v.constraints, req.dims)
            if vfail is not None:
                _stage, reason, detail = vfail
                detail = f"variant {v.name}: {detail}"
                vrows.append(row(p, "rejected", "constraint", reason=reason, variant=v.name, detail=detail))
                if cons_fail is None:
                    cons_fail = (reason, detail)
                continue
        eligible.append(v)
    if not eligible:
        # A missing ISA feature is the actionable reason (another machine could run it), so it wins.
        if missing_feat is not None:
            return (("isa", f"isa_unavailable:{missing_feat}",
                     f"no variant runs on isa [{', '.join(sorted(req.isa))}]"), None, vrows)
        assert cons_fail is not None
        return ("constraint", cons_fail[0], cons_fail[1] + "; no other variant is eligible"), None, vrows
    for out_port, in_port in req.alias_list:
        port = p.ports.get(out_port)
        if port is None or port.role != "output" or f"input:{in_port}" not in port.may_alias:
            return (("alias", f"alias_unsafe:{out_port}",
                     f"output {out_port} may not alias input {in_port} "
                     f"(declared may_alias: {', '.join(port.may_alias) if port else 'no such output'})"),
                    None, [])
    return None, Survivor(p, tuple(eligible), tuple(unchecked)), vrows


def filter_providers(req: Request, providers: Sequence[Provider],
                     pre_rows: Sequence[dict[str, Any]] = ()) -> tuple[list[Survivor], list[dict]]:
    """Apply the per-request filters to `providers` (the survivors of `prefilter`).

    Returns survivors and rows: `pre_rows` first, then one per rejected provider or variant, in id order.
    """
    survivors: list[Survivor] = []
    rows: list[dict] = list(pre_rows)
    dims = req.dims
    req_ports = req.ports
    for p in providers:
        rej = _check_ports(req, p)
        if rej is None:
            unchecked: list[str] = [f"port:{n}" for n in p.ports if n not in req_ports] if len(req_ports) < len(
                p.ports) else []
            rej = _constraints(p.constraints, dims)
            if rej is None:
                rej, survivor, vrows = _check_variants(req, p, unchecked)
                if rej is None:
                    survivors.append(survivor)
                else:
                    rows.append(row(p, "rejected", rej[0], reason=rej[1], detail=rej[2]))
                rows.extend(vrows)
                continue
        rows.append(row(p, "rejected", rej[0], reason=rej[1], detail=rej[2]))
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
        if not layout_accepts(port, dtype, layout):
            out.append(f"layout_mismatch:{name}")
    failed = _constraints(p.constraints, req.dims)
    if failed is not None:
        out.append(failed[1])
    if not any(not (v.requires - req.isa) for v in p.variants):
        out.append("isa_unavailable")
    for out_port, in_port in req.alias_list:
        port = p.ports.get(out_port)
        if port is None or f"input:{in_port}" not in port.may_alias:
            out.append(f"alias_unsafe:{out_port}")
    return out
