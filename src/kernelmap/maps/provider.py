"""Map stage data model: the parsed, immutable form of one validated kernel map (a "provider").

Input: nothing (the loader builds these). Output: frozen dataclasses the resolver, planner and code
generator read. It does not validate (loader.py does) and does not choose anything (resolve/ does).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelmap.maps.expr import Expr, ExprValueError

__all__ = ["CallParam", "Constraint", "Param", "Port", "Provider", "Scratch", "Variant", "LIFECYCLE"]

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


@dataclass(frozen=True)
class Constraint:
    """One machine-checkable rule on a dim: multiple, min, max or equals an expression of dims."""

    dim: str
    rule: str
    value: Expr
    const: int | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.value.names:  # constant bound: evaluate once, not per request
            object.__setattr__(self, "const", self.value.evaluate({}))

    def check(self, dims: Mapping[str, int]) -> bool | None:
        """True/False on concrete dims; None when the dim or a name in the value is not bound."""
        got = dims.get(self.dim)
        if got is None:
            return None
        bound = self.const
        if bound is None:
            try:
                bound = self.value.evaluate(dims)
            except ExprValueError:
                return None
        if self.rule == "multiple":
            return bound > 0 and got % bound == 0
        if self.rule == "min":
            return got >= bound
        if self.rule == "max":
            return got <= bound
        return got == bound

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
