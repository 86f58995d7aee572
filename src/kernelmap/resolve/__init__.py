"""Resolve stage: one request -> one provider and variant, mechanically: gather, filter, rank, fail closed.

Input: a `Request` and a `Registry`. Output: a `Resolution` (provider, variant, trace entry) or a
ResolutionError carrying the same trace entry. It never falls back to another op, format or phase.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from kernelmap.errors import ResolutionError
from kernelmap.maps.provider import Provider, Variant
from kernelmap.maps.registry import Registry
from kernelmap.resolve.filter import filter_providers, prefilter
from kernelmap.resolve.rank import rank
from kernelmap.resolve.request import Request
from kernelmap.resolve.trace import SelectionTrace

__all__ = ["Request", "Resolution", "SelectionTrace", "resolve"]


@dataclass(frozen=True)
class Resolution:
    """The chosen provider and variant; `trace_entry` (built on first use) records every candidate."""

    provider: Provider
    variant: Variant
    request: Request
    rows: list[dict[str, Any]]

    @functools.cached_property
    def trace_entry(self) -> dict[str, Any]:
        """{label, request, rows, selected, error} as written in selection_trace.json."""
        v = self.variant
        return {"label": self.request.label, "request": self.request.to_dict(), "rows": self.rows,
                "selected": {"provider": self.provider.id, "variant": v.name, "symbol": v.symbol},
                "error": None}


def _gather(request: Request, registry: Registry) -> tuple[tuple[dict[str, Any], ...], tuple[Provider, ...]]:
    """Providers of the op after the checks that depend only on the request's selection keys (cached)."""
    key = (request.op, request.phase, request.allow_status, request.interface, request.contract)
    cache = registry._cache
    hit = cache.get(key)
    if hit is None:
        hit = cache[key] = prefilter(registry.by_op(request.op), request)
    return hit


def resolve(request: Request, registry: Registry, evidence: Any = None) -> Resolution:
    """Resolve one request; raises ResolutionError (with `.trace_entry`) when nothing or too much survives.

    Trace rows come in a fixed order: status/phase/interface/contract rejections, then the other
    rejections, then the ranked survivors, each group in provider-id order. Rows are read-only dicts.
    `evidence` (a `kernelmap.lkb.evidence.VariantEvidence`) ranks the winner's variants where it shows
    a difference beyond noise; without it, variant priority decides.
    """
    pre_rows, providers = _gather(request, registry)
    survivors, rows = filter_providers(request, providers, pre_rows)
    try:
        provider, variant, rows = rank(request, survivors, rows, registry.providers, evidence)
    except ResolutionError as exc:
        exc.trace_entry = {"label": request.label, "request": request.to_dict(), "rows": rows,
                           "selected": None, "error": exc.line()}
        raise
    return Resolution(provider, variant, request, rows)
