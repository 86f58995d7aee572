"""Requests: turn each scheduled op instance into a resolver request and resolve the whole graph.

Input: a scheduled graph, the contracts the policy chose, the interfaces, the registry and the
target ISA. Output: every op's provider and variant set on the graph, and one trace entry per op
in the selection trace (failures included). The first failure raises after the trace has recorded
every op, so `kernelmap explain` can show all of them. A dim that varies at run time is stated as
the range of values it takes (`runtime_dims`), so constraints and scratch sizes hold for all of them.
"""

from __future__ import annotations

from kernelmap.circuits.graph import Graph, OpNode
from kernelmap.circuits.hydrate import weight_layout
from kernelmap.circuits.loader import Interfaces
from kernelmap.errors import PlanError, ResolutionError
from kernelmap.maps.expr import Bound, ExprValueError
from kernelmap.maps.registry import Registry
from kernelmap.resolve import Request, SelectionTrace, resolve

__all__ = ["request_for", "resolve_graph", "runtime_dims", "scratch_sizes"]


def runtime_dims(op: OpNode) -> dict[str, Bound]:
    """The op's dims as its kernel meets them at run time. A dim the program sets at run time (the rows
    of a prefill chunk, n_tokens; the KV capacity, n_ctx) is the range 1..its planning maximum: the
    generated program refuses n_tokens < 1 and n_ctx < 1, and never exceeds the maximum. Decode rows
    (M = 1) and every other dim are one value."""
    return {k: ((1, v) if k in op.dynamic_dims and v > 1 else v) for k, v in op.dims.items()}


def request_for(op: OpNode, graph: Graph, contract: str, interfaces: Interfaces, isa: frozenset[str],
                allow_status: frozenset[str] = frozenset({"production"})) -> Request:
    """The resolver request of one op instance in its phase."""
    ports_spec = interfaces.by_id[op.interface]["ports"]
    ports: dict[str, tuple[str, str]] = {}
    for port, tname in {**op.inputs, **op.outputs}.items():
        ports[port] = (graph.tensors[tname].dtype, ports_spec[port]["layout"])
    for port, ref in op.weights.items():
        ports[port] = (ref.dtype, weight_layout(ref.dtype, len(ref.shape)))
    for port, sname in op.state.items():
        ports[port] = (graph.state[sname].dtype, ports_spec[port]["layout"])
    return Request(op=op.op, phase=graph.phase, contract=contract, interface=op.interface, ports=ports,
                   dims=runtime_dims(op), allow_status=allow_status, isa=isa, label=f"{graph.phase}:{op.label}")


def resolve_graph(graph: Graph, contracts: dict[str, str], interfaces: Interfaces, registry: Registry,
                  isa: frozenset[str], trace: SelectionTrace,
                  allow_status: frozenset[str] = frozenset({"production"})) -> None:
    """Resolve every op of `graph`; record all outcomes in `trace`; raise the first failure."""
    first_error: ResolutionError | None = None
    for op in graph.ops:
        req = request_for(op, graph, contracts[op.label], interfaces, isa, allow_status)
        try:
            res = resolve(req, registry)
        except ResolutionError as exc:
            trace.add(req.label, req, exc)
            first_error = first_error or exc
            continue
        trace.add(req.label, req, res)
        op.provider = res.provider.id
        op.variant = res.variant.name
    if first_error is not None:
        raise first_error


def scratch_sizes(graph: Graph, registry: Registry) -> dict[str, int]:
    """Bytes of every scratch buffer of the resolved `graph`, keyed `<op cname>__scratch_<name>`: the
    largest size over the op's run-time dims. A size that is negative or unevaluable for some of them
    is a PlanError naming the op, the map and the field (never rounded to a minimal buffer)."""
    sizes: dict[str, int] = {}
    for op in graph.ops:
        if op.provider is None:
            raise PlanError("op was not resolved before its scratch was sized", value=op.label)
        provider = registry.providers[op.provider]
        dims = runtime_dims(op)
        for i, s in enumerate(provider.scratch):
            try:
                sizes[f"{op.cname}__scratch_{s.name}"] = s.max_bytes(dims)
            except ExprValueError as exc:
                raise PlanError(f"{graph.phase}:{op.label}: cannot size scratch \"{s.name}\": {exc}",
                                path=provider.path, pointer=f"/scratch/{i}/size", value=s.size.text) from None
    return sizes
