"""Resolve stage: one request -> one provider and variant, mechanically: gather, filter, rank, fail closed.

Input: a `Request` and a `Registry`. Output: a `Resolution` (provider, variant, trace entry) or a
ResolutionError carrying the same trace entry. It never falls back to another op, format or phase.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kernelmap.errors import ResolutionError
from kernelmap.maps.provider import Provider, Variant
from kernelmap.maps.registry import Registry
from kernelmap.resolve.filter import filter_providers
from kernelmap.resolve.rank import rank
from kernelmap.resolve.request import Request
from kernelmap.resolve.trace import SelectionTrace

__all__ = ["Request", "Resolution", "SelectionTrace", "resolve"]


@dataclass(frozen=True)
class Resolution:
    """The chosen provider and variant, and the trace entry recording every candidate."""

    provider: Provider
    variant: Variant
    trace_entry: dict[str, Any]


def _sort_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    # Provider id, then the provider-level row before its variant rows, then variant name.
    return sorted(rows, key=lambda r: (r["provider"], "variant" in r and r["stage"] != "rank",
                                       r.get("variant", ""), r["stage"]))


def resolve(request: Request, registry: Registry) -> Resolution:
    """Resolve one request; raises ResolutionError (with `.trace_entry`) when nothing or too much survives."""
    survivors, rows = filter_providers(request, registry.by_op(request.op))
    try:
        provider, variant, rows = rank(request, survivors, rows, registry.providers)
    except ResolutionError as exc:
        exc.trace_entry = {"label": request.label, "request": request.to_dict(), "rows": _sort_rows(rows),
                           "selected": None, "error": exc.line()}
        raise
    entry = {"label": request.label, "request": request.to_dict(), "rows": _sort_rows(rows),
             "selected": {"provider": provider.id, "variant": variant.name, "symbol": variant.symbol},
             "error": None}
    return Resolution(provider, variant, entry)
