"""Map stage data model: the parsed, immutable form of one validated kernel map (a "provider").

Input: nothing (the loader builds these). Output: frozen dataclasses the resolver, planner and code
generator read. It does not validate (loader.py does) and does not choose anything (resolve/ does).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelmap.maps.expr import Bound, Expr, ExprValueError, assignments, show_bound

__all__ = ["CallParam", "Constraint", "FAILED", "LIFECYCLE", "OK", "Param", "Port", "Provider", "Scratch",
           "UNEVALUABLE", "Variant"]

# Lifecycle rank used by the resolver: lower is better.
LIFECYCLE: dict[str, int] = {"production": 0, "candidate": 1, "diagnostic": 2, "deprecated": 3}


@dataclass(frozen=True)
class Port:
    """One declared buffer of a provider; `role` is input, weight or output (the list it came from)."""

    name: str
    role: str
    dtype: str
    shape: tuple[Expr, ...]
    layout: str
    access: str
    storage: str
    optional: bool = False
    may_alias: tuple[str, ...] = ()
    ring: str | None = None  # state ports: "write" or the int64 param bounding the rows read (codegen/ring.py)


@dataclass(frozen=True)
class Param:
    """A typed scalar argument (float, int64 or int32)."""

    name: str
    type: str
    desc: str = ""


@dataclass(frozen=True)
class Scratch:
    """A temporary buffer; `size` is an expression of dims, in bytes."""

    name: str
    size: Expr

    def max_bytes(self, dims: Mapping[str, Bound]) -> int:
        """Bytes to reserve: the greatest size over every value the ranged dims take. ExprValueError when
        the size is unevaluable or negative for any of them (a negative size is never rounded up)."""
        lo, hi = self.size.span(dims)
        if lo < 0:
            raise ExprValueError(f"scratch {self.name} size {self.size.text} is negative ({lo} bytes) for "
                                 f"dims {_show_dims(dims, self.size.names)}")
        return hi


# Outcomes of checking one constraint against a request's dims.
OK, FAILED, UNEVALUABLE = "ok", "failed", "unevaluable"


def _holds(rule: str, got: int, bound: int) -> bool:
    if rule == "multiple":
        if bound <= 0:
            raise ExprValueError(f"\"multiple\" needs a positive bound, not {bound}")
        return got % bound == 0
    if rule == "min":
        return got >= bound
    if rule == "max":
        return got <= bound
    return got == bound


def _range_witness(rule: str, span: tuple[int, int], bound: int) -> int | None:
    """A value of the range [lo, hi] that breaks the rule (None if every value keeps it)."""
    lo, hi = span
    if rule == "multiple":
        if bound <= 0:
            raise ExprValueError(f"\"multiple\" needs a positive bound, not {bound}")
        # Of two consecutive integers at most one is a multiple of a bound > 1.
        return next((v for v in (lo, lo + 1) if v <= hi and v % bound), None)
    if rule == "min":
        return lo if lo < bound else None
    if rule == "max":
        return hi if hi > bound else None
    return lo if lo != bound else (hi if hi != bound else None)


def _show_dims(dims: Mapping[str, Bound], names: frozenset[str]) -> str:
    return ", ".join(f"{n}={show_bound(dims[n])}" for n in sorted(names) if n in dims) or "(none)"


@dataclass(frozen=True)
class Constraint:
    """One machine-checkable rule on a dim: multiple, min, max or equals an expression of dims."""

    dim: str
    rule: str
    value: Expr
    const: int | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.value.names:  # constant bound: evaluate once, not per request (the loader checked it)
            object.__setattr__(self, "const", self.value.evaluate({}))

    def check(self, dims: Mapping[str, Bound]) -> tuple[str, str | None]:
        """(OK, None), (FAILED, the breaking values, e.g. "M=1") or (UNEVALUABLE, why).

        A dim bound to a range (it varies at run time) must keep the rule for every value of the range.
        A dim the request does not give, a bound that divides by zero or is not an integer, or ranges
        too large to enumerate make the constraint unevaluable, which the resolver treats as a rejection.
        """
        got = dims.get(self.dim)
        bound = self.const
        try:
            if bound is not None and type(got) is int:  # the common case: one value, a constant bound
                return (OK, None) if _holds(self.rule, got, bound) else (FAILED, f"{self.dim}={got}")
            if got is None:
                return UNEVALUABLE, f"dim {self.dim} is not given by the request"
            if bound is None and all(type(dims.get(n)) is not tuple for n in self.value.names):
                bound = self.value.evaluate(dims)
            if bound is not None:
                if isinstance(got, int):
                    return (OK, None) if _holds(self.rule, got, bound) else (FAILED, f"{self.dim}={got}")
                bad = _range_witness(self.rule, got, bound)
                return (OK, None) if bad is None else (FAILED, f"{self.dim}={bad}")
            names = self.value.names | {self.dim}
            for env in assignments(names, dims):
                if not _holds(self.rule, env[self.dim], self.value.evaluate(env)):
                    shown = [self.dim, *sorted(n for n in names - {self.dim} if type(dims[n]) is tuple)]
                    return FAILED, ", ".join(f"{n}={env[n]}" for n in shown)
        except ExprValueError as exc:
            return UNEVALUABLE, str(exc)
        return OK, None

    @property
    def text(self) -> str:
        return f"{self.dim} {self.rule} {self.value.text}"


@dataclass(frozen=True)
class Variant:
    """One ISA variant of a provider: its symbol, source file, required CPU features and flags."""

    name: str
    symbol: str
    source: str
    requires: frozenset[str]
    cflags: tuple[str, ...]
    priority: int
    constraints: tuple[Constraint, ...] = ()


@dataclass(frozen=True)
class CallParam:
    """One C argument: its name, where its value comes from (`kind:name`) and an optional cast."""

    name: str
    source: str
    cast: str | None = None

    @property
    def kind(self) -> str:
        return self.source.split(":", 1)[0]

    @property
    def ref(self) -> str:
        return self.source.split(":", 1)[1]


@dataclass(frozen=True)
class Provider:
    """A validated kernel map. `raw` is the JSON dict as loaded (treat it as read-only)."""

    id: str
    op: str
    interface: str
    status: str
    priority: int
    group: str
    phases: frozenset[str]
    contract: str
    reference: str
    comparison: Any
    quant: dict[str, str]
    inputs: tuple[Port, ...]
    weights: tuple[Port, ...]
    outputs: tuple[Port, ...]
    dims: tuple[str, ...]
    params: tuple[Param, ...]
    scratch: tuple[Scratch, ...]
    constraints: tuple[Constraint, ...]
    variants: tuple[Variant, ...]
    sources: tuple[str, ...]
    call_abi: tuple[CallParam, ...]
    tests: tuple[str, ...]
    notes: str
    path: Path
    sha256: str
    raw: dict[str, Any] = field(repr=False, compare=False)
    ports: dict[str, Port] = field(repr=False, compare=False, default_factory=dict)
    base_row: dict[str, Any] = field(repr=False, compare=False, default_factory=dict)
    ranked_variants: tuple[Variant, ...] = field(repr=False, compare=False, default=())
    isa_cache: dict[frozenset[str], Any] = field(repr=False, compare=False, default_factory=dict)

    def __post_init__(self) -> None:
        # Built once for the resolver: the fields every trace row repeats, and variants best-first.
        object.__setattr__(self, "base_row", {"provider": self.id, "status": self.status,
                                              "priority": self.priority, "equivalence_group": self.group})
        object.__setattr__(self, "ranked_variants",
                           tuple(sorted(self.variants, key=lambda v: (-v.priority, v.name))))

    @property
    def lifecycle(self) -> int:
        """Lifecycle rank: production 0, candidate 1, diagnostic 2, deprecated 3."""
        return LIFECYCLE[self.status]

    def variant(self, name: str) -> Variant:
        """The variant called `name` (KeyError if none)."""
        for v in self.variants:
            if v.name == name:
                return v
        raise KeyError(name)
