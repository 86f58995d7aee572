"""The logical graph: op instances over SSA tensors for one phase, as hydration produces it.

Data only: the hydrator builds it, the scheduler adds ops to it, the resolver binds providers to its
ops, the memory planner and code generator read it. Names (`cname`) are C-safe identifiers derived
by the hydrator, never copied from a model file.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["Graph", "OpNode", "StateBuf", "Tensor", "WeightRef"]


@dataclass
class Tensor:
    """One SSA activation value. `shape[0]` is the row count when `rows_dynamic` (n_tokens at run time)."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    rows_dynamic: bool = False
    producer: str | None = None
    kind: str = "activation"  # activation | input


@dataclass(frozen=True)
class WeightRef:
    """A weight a port reads: the GGUF tensor, its dtype and shape in [rows][cols] order.

    `rows` = (a, b) when the port reads only rows [a, b) of the tensor's outermost axis (a fused
    tensor such as a QKV projection); `shape` is then the slice's shape.
    """

    cname: str
    tensor: str
    dtype: str
    shape: tuple[int, ...]
    rows: tuple[int, int] | None = None


@dataclass(frozen=True)
class StateBuf:
    """A persistent buffer (KV cache of one layer): shape uses C for the runtime capacity."""

    cname: str
    dtype: str
    shape: tuple[str | int, ...]


@dataclass
class OpNode:
    """One op instance in one phase, before and after resolution."""

    label: str
    cname: str
    op: str
    layer: int
    interface: str
    inputs: dict[str, str]
    outputs: dict[str, str]
    weights: dict[str, WeightRef] = field(default_factory=dict)
    state: dict[str, str] = field(default_factory=dict)
    dims: dict[str, int] = field(default_factory=dict)
    dynamic_dims: dict[str, str] = field(default_factory=dict)  # dim -> runtime value (n_tokens, n_ctx)
    params: dict[str, Any] = field(default_factory=dict)
    policy_keys: dict[str, str] = field(default_factory=dict)
    rows_last: bool = False
    inserted_by: str | None = None
    # filled by resolution
    provider: str | None = None
    variant: str | None = None


@dataclass
class Graph:
    """Ops in execution order for one phase, with their tensors and state buffers."""

    phase: str
    max_rows: int
    ops: list[OpNode]
    tensors: dict[str, Tensor]
    state: dict[str, StateBuf]
    outputs: dict[str, str]
    config: dict[str, Any]
