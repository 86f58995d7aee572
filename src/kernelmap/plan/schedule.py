"""Scheduling: apply the numerics policy to the logical graph and insert the ops it implies.

Input: a hydrated graph and a numerics policy. Output: the same graph with every op's contract set
and an activation quantizer inserted wherever an op's policy rule asks for a quantized activation its
producer does not give (one quantizer per (tensor, dtype), shared by all its consumers, placed right
after the producer). It does not pick kernels (the resolver does) nor allocate memory.
"""

from __future__ import annotations

from kernelmap.circuits.graph import Graph, OpNode, Tensor
from kernelmap.circuits.hydrate import c_ident
from kernelmap.circuits.loader import Interfaces
from kernelmap.errors import ModelError, PolicyError
from kernelmap.numerics.policy import Policy, Rule

__all__ = ["schedule", "policy_keys", "check_weight_types"]


def policy_keys(op: OpNode) -> dict[str, str]:
    """The keys the policy matches on: the first weight's dtype, plus the circuit's own policy keys."""
    keys = dict(op.policy_keys)
    if op.weights:
        first = sorted(op.weights)[0]
        keys.setdefault("weight", op.weights[first].dtype)
    return keys


def check_weight_types(graph: Graph, policy: Policy, *, source: str | None = None) -> None:
    """Refuse a weight whose dtype the policy has no rule for (e.g. IQ or TQ quants), naming the tensor, its type
    and the dtypes the policy supports for that op (the `weight` values of the op's rules)."""
    for op in graph.ops:
        keys = policy_keys(op)
        dtype = keys.get("weight")
        supported = sorted({dict(r.match)["weight"] for r in policy.rules
                            if r.op == op.op and "weight" in dict(r.match)})
        if dtype is None or not supported or dtype in supported:
            continue
        ref = op.weights[sorted(op.weights)[0]]
        raise ModelError(f"unsupported weight type for {op.op} under policy {policy.name}", path=source,
                         pointer=f"tensors/{ref.tensor}/type", value=dtype, expected=supported,
                         hint="requantize the model to a supported type (llama.cpp's quantizer can, with "
                              "--allow-requantize)")


def schedule(graph: Graph, policy: Policy, interfaces: Interfaces) -> dict[str, str]:
    """Return the contract of every op (by label) and insert the activation quantizers the policy implies."""
    contracts: dict[str, str] = {}
    quantized: dict[tuple[str, str], str] = {}
    new_ops: list[OpNode] = []
    pending: dict[str, list[OpNode]] = {}  # producer label -> quantizers to place after it
    for op in graph.ops:
        rule = _rule(policy, op)
        contracts[op.label] = rule.contract
        if rule.activation is None:
            continue
        ports = interfaces.by_id[op.interface]["ports"]
        for port, tname in list(op.inputs.items()):
            if ports[port]["role"] != "input":
                continue
            t = graph.tensors[tname]
            if t.dtype == rule.activation or t.dtype != "f32":
                continue
            key = (tname, rule.activation)
            if key not in quantized:
                qop, qt = _quantizer(graph, t, rule.activation, op, interfaces)
                qrule = policy.rule_for("quantize_act", activation=rule.activation)
                contracts[qop.label] = qrule.contract
                quantized[key] = qt.name
                pending.setdefault(t.producer or "", []).append(qop)
            op.inputs[port] = quantized[key]
    # place each quantizer right after its producer (inputs produced by nobody go first)
    for q in pending.get("", []):
        new_ops.append(q)
    for op in graph.ops:
        new_ops.append(op)
        new_ops.extend(pending.get(op.label, []))
    graph.ops[:] = new_ops
    return contracts


def _rule(policy: Policy, op: OpNode) -> Rule:
    """The policy rule of `op`; a refusal names the weight tensor and its type when the op reads one."""
    keys = policy_keys(op)
    try:
        return policy.rule_for(op.op, **keys)
    except PolicyError as exc:
        if not op.weights:
            raise
        ref = op.weights[sorted(op.weights)[0]]
        raise PolicyError(f"tensor type {ref.dtype} has no {op.op} rule in numerics policy {policy.name} "
                          f"(op {op.label})", pointer=ref.tensor, value=ref.dtype, expected=exc.expected) from None


def _quantizer(graph: Graph, t: Tensor, dtype: str, consumer: OpNode, interfaces: Interfaces) -> tuple[OpNode, Tensor]:
    iface_id, _ = interfaces.for_op("quantize_act")
    base = t.name.removeprefix("t_")
    qname = c_ident(f"q_{base}_{dtype}")
    rows, cols = t.shape[0], t.shape[-1]
    qt = Tensor(qname, dtype, t.shape, t.rows_dynamic, None)
    label = f"{t.producer}.quantize_{dtype}" if t.producer else f"quantize_{dtype}.{base}"
    # a tensor made by a last-row op is that one row: its quantizer is a last-row op too (so it fuses with its
    # producer, and runs where the producer runs: the prompt's last chunk)
    producer = next((o for o in graph.ops if o.label == t.producer), None) if t.producer else None
    rows_last = bool(producer is not None and producer.rows_last and not t.rows_dynamic)
    op = OpNode(label=label, cname=c_ident(f"quant_{base}_{dtype}"), op="quantize_act", layer=consumer.layer,
                interface=iface_id, inputs={"x": t.name}, outputs={"y": qname},
                dims={"M": rows, "K": cols}, dynamic_dims={"M": "n_tokens"} if t.rows_dynamic else {},
                inserted_by="activation_quantize", rows_last=rows_last)
    qt.producer = label
    graph.tensors[qname] = qt
    return op, qt
