"""Fusion: data rules (one file per CPU class) rewrite chains of logical ops into one fused op instance.

Input: a logical graph (hydrated, before scheduling and resolution), the rules for the CPU class
(`fusion/rules/<class>.json`, resolved along the class chain parent-first with per-id patches) and the
kernels a probe of the full kernel library found. Output: the graph with each applied match replaced
by one OpNode of the rule's fused op, and one record per rule decision for the trace. It does not pick
kernels (the resolver does) and never assumes a capability it cannot probe: such a rule is refused.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema

from kernelmap.circuits.expr import evaluate
from kernelmap.circuits.graph import Graph, OpNode
from kernelmap.circuits.hydrate import c_ident
from kernelmap.circuits.loader import Interfaces, load_interfaces
from kernelmap.errors import PlanError, closest

__all__ = [
    "CAPABILITY_KINDS",
    "RULES_DIR",
    "FusionRule",
    "fuse",
    "fuse_for_target",
    "fusion_lines",
    "load_rules",
    "parse_rules",
    "rules_digest",
]

RULES_DIR = Path(__file__).resolve().parent.parent / "fusion" / "rules"
SCHEMA_PATH = RULES_DIR.parent / "rules.schema.json"
CAPABILITY_KINDS = ("kernel", "isa")
_PATCHABLE = ("pattern", "fused_op", "priority", "requires", "enabled", "notes", "stage", "contract")


@dataclass(frozen=True)
class Step:
    """One op of a pattern: its op name, the link from the previous op, and its port -> fused port map."""

    op: str
    via: tuple[str, str] | None  # (previous op's output port, this op's input port)
    ports: tuple[tuple[str, str], ...]
    policy: tuple[tuple[str, str], ...] = ()  # policy keys the op must carry (e.g. style=neox)
    contract: str | None = None  # scheduled stage: the contract the policy gave the op

    def accepts(self, op: OpNode, contracts: dict[str, str] | None = None) -> bool:
        """True when `op` is this step's op, carries every required policy key and (after scheduling) contract."""
        if op.op != self.op or any(op.policy_keys.get(k) != v for k, v in self.policy):
            return False
        return self.contract is None or (contracts or {}).get(op.label) == self.contract


@dataclass(frozen=True)
class FusionRule:
    """A validated rule after class-chain resolution; `source` is the file that last defined or patched it."""

    id: str
    pattern: tuple[Step, ...]
    fused_op: str
    priority: int
    requires: tuple[str, ...]
    enabled: bool
    source: str
    stage: str = "logical"  # logical: before scheduling; scheduled: after it, contracts known
    contract: str | None = None  # scheduled stage: the fused op's contract (the composition's)


@functools.lru_cache(maxsize=1)
def _validator() -> jsonschema.Draft202012Validator:
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    return jsonschema.Draft202012Validator(schema)


def _read(path: Path) -> dict[str, Any]:
    try:
        doc = json.loads(path.read_bytes())
    except OSError as exc:
        raise PlanError(f"cannot read fusion rules: {exc.strerror}", path=path) from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise PlanError(f"fusion rules are not valid JSON: {exc}", path=path) from None
    errors = sorted(_validator().iter_errors(doc), key=lambda e: list(map(str, e.absolute_path)))
    if errors:
        err = errors[0]
        raise PlanError(err.message, path=path, pointer="/" + "/".join(str(p) for p in err.absolute_path))
    return doc


def _chain(cpu_class: str, rules_dir: Path) -> list[tuple[Path, dict[str, Any]]]:
    files = {p.stem: p for p in sorted(rules_dir.glob("*.json"))}
    chain: list[tuple[Path, dict[str, Any]]] = []
    name: str | None = cpu_class
    while name is not None:
        path = files.get(name)
        if path is None:
            near = closest(name, list(files))
            raise PlanError(f"no fusion rules for CPU class \"{name}\"", path=rules_dir, value=name,
                            expected=sorted(files), hint=f"add {name}.json (closest: {near})" if near else
                            f"add {name}.json naming its parent class")
        doc = _read(path)
        if doc["class"] != name:
            raise PlanError("class does not equal the file stem", path=path, pointer="/class", value=doc["class"],
                            expected=name)
        if any(p == path for p, _ in chain):
            raise PlanError("the class chain has a cycle", path=path, pointer="/parent", value=doc.get("parent"))
        chain.append((path, doc))
        name = doc.get("parent")
    chain.reverse()
    return chain


def parse_rules(chain: Sequence[tuple[Path, dict[str, Any]]]) -> list[FusionRule]:
    """Merge rule documents parent-first: a child entry with a known id patches it, a new id adds a rule."""
    merged: dict[str, tuple[dict[str, Any], str]] = {}
    for path, doc in chain:
        for i, entry in enumerate(doc["rules"]):
            pointer = f"/rules/{i}"
            if entry["id"] in merged:
                base, _ = merged[entry["id"]]
                merged[entry["id"]] = ({**base, **{k: entry[k] for k in _PATCHABLE if k in entry}}, f"{path}#{pointer}")
            else:
                missing = [k for k in ("pattern", "fused_op", "priority", "requires") if k not in entry]
                if missing:
                    raise PlanError(f"new rule \"{entry['id']}\" lacks {', '.join(missing)}", path=path,
                                    pointer=pointer, hint="only a rule a parent class defines may be patched")
                merged[entry["id"]] = (dict(entry), f"{path}#{pointer}")
    rules = []
    for rid, (entry, source) in sorted(merged.items()):
        steps = []
        for k, step in enumerate(entry["pattern"]):
            via = step.get("via")
            if (k == 0) != (via is None):
                raise PlanError(f"rule \"{rid}\": pattern step {k} " + ("must not have" if k == 0 else "needs") +
                                " a via link", path=source.partition("#")[0], pointer=f"/pattern/{k}")
            steps.append(Step(step["op"], (via["from"], via["to"]) if via else None,
                              tuple(sorted(step["ports"].items())), tuple(sorted(step.get("policy", {}).items())),
                              step.get("contract")))
        stage = entry.get("stage", "logical")
        has_contracts = entry.get("contract") is not None or any(s.contract for s in steps)
        if (stage == "scheduled") != (entry.get("contract") is not None) or (stage == "logical" and has_contracts):
            raise PlanError(f"rule \"{rid}\": a scheduled-stage rule names the fused contract (and may match step "
                            "contracts); a logical-stage rule names none", path=source.partition("#")[0],
                            pointer="/contract", value=stage)
        rules.append(FusionRule(rid, tuple(steps), entry["fused_op"], int(entry["priority"]),
                                tuple(entry["requires"]), bool(entry.get("enabled", True)), source, stage,
                                entry.get("contract")))
    return rules


def rules_digest(cpu_class: str, *, rules_dir: Path = RULES_DIR) -> str:
    """sha256 over the class chain's rule files (parent first): part of a build's cache key."""
    h = hashlib.sha256(b"kernelmap.fusion_rules/1\0")
    for path, _doc in _chain(cpu_class, Path(rules_dir)):
        h.update(path.name.encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()


def fusion_lines(records: Sequence[dict[str, Any]]) -> list[str]:
    """One human-readable line per record, e.g. for `kernelmap explain`: decision, rule, ops, reason."""
    return [f"{r['decision']:<8} {r['rule']} (priority {r['priority']}): "
            f"{' + '.join(r['ops']) if r['ops'] else '-'}; {r['reason']}" for r in records]


def load_rules(cpu_class: str | None = None, *, rules_dir: Path = RULES_DIR) -> list[FusionRule]:
    """The rules of `cpu_class` (default: this host's class), resolved along its chain, sorted by id."""
    if cpu_class is None:
        from kernelmap.target import host_class

        cpu_class = host_class()
    return parse_rules(_chain(cpu_class, Path(rules_dir)))


def _unmet(rule: FusionRule, available: Any) -> list[str]:
    """Capabilities of `rule` the probe did not find; PlanError for one the runtime cannot probe."""
    from kernelmap.target import KNOWN_FEATURES

    unmet = []
    for cap in rule.requires:
        kind, _, name = cap.partition(":")
        if kind == "kernel" and name in available.known:
            if not available.has_map(name):
                unmet.append(cap)
        elif kind == "isa" and name in KNOWN_FEATURES:
            if name not in available.isa:
                unmet.append(cap)
        else:
            why = (f"names kernel map \"{name}\" that no map defines" if kind == "kernel" else
                   f"names unknown ISA feature \"{name}\"" if kind == "isa" else
                   f"capability kind \"{kind}\" cannot be probed (known: {', '.join(CAPABILITY_KINDS)})")
            raise PlanError(f"fusion rule \"{rule.id}\" requires \"{cap}\", which the runtime cannot probe: {why}",
                            path=rule.source.partition("#")[0], pointer="/requires", value=cap,
                            hint="a rule may require only kernel:<map id> or isa:<feature>")
    return unmet


def _check_shape(rule: FusionRule, interfaces: Interfaces, phase: str | None = None) -> tuple[str, dict[str, Any]]:
    """The fused op's interface in `phase`, after checking the rule's fused ports are exactly its ports."""
    try:
        iface_id, iface = interfaces.for_op(rule.fused_op, phase)
    except Exception as exc:
        raise PlanError(f"fusion rule \"{rule.id}\": fused op \"{rule.fused_op}\" has no interface",
                        path=rule.source.partition("#")[0], pointer="/fused_op", value=rule.fused_op,
                        hint=str(exc).splitlines()[0]) from None
    mapped = [fused for step in rule.pattern for _, fused in step.ports]
    if sorted(mapped) != sorted(iface["ports"]):
        raise PlanError(f"fusion rule \"{rule.id}\": fused ports do not equal the ports of {iface_id}",
                        path=rule.source.partition("#")[0], pointer="/pattern", value=sorted(mapped),
                        expected=sorted(iface["ports"]))
    for k, step in enumerate(rule.pattern):
        ports = interfaces.for_op(step.op, phase)[1]["ports"]
        covered = {p for p, _ in step.ports}
        if step.via:
            covered.add(step.via[1])
        nxt = rule.pattern[k + 1].via if k + 1 < len(rule.pattern) else None
        if nxt:
            covered.add(nxt[0])
        if covered != set(ports):
            raise PlanError(f"fusion rule \"{rule.id}\": pattern step {k} ({step.op}) leaves ports unmapped",
                            path=rule.source.partition("#")[0], pointer=f"/pattern/{k}/ports",
                            value=sorted(covered), expected=sorted(ports))
    return iface_id, iface


@dataclass
class _Match:
    rule: FusionRule
    idx: tuple[int, ...]


def _readers(graph: Graph) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for i, op in enumerate(graph.ops):
        for tname in op.inputs.values():
            out.setdefault(tname, []).append(i)
    return out


def _find(graph: Graph, rule: FusionRule, readers: dict[str, list[int]], contracts: dict[str, str] | None
          ) -> list[tuple[int, ...]]:
    found: list[tuple[int, ...]] = []

    def walk(path: tuple[int, ...], k: int) -> None:
        if k == len(rule.pattern):
            found.append(path)
            return
        step = rule.pattern[k]
        assert step.via is not None
        tname = graph.ops[path[-1]].outputs.get(step.via[0])
        for j in readers.get(tname or "", []):
            op = graph.ops[j]
            if j > path[-1] and step.accepts(op, contracts) and op.inputs.get(step.via[1]) == tname:
                walk((*path, j), k + 1)

    for i, op in enumerate(graph.ops):
        if rule.pattern[0].accepts(op, contracts):
            walk((i,), 1)
    return found


def _union(ops: list[OpNode], attr: str) -> dict[str, Any] | str:
    out: dict[str, Any] = {}
    for op in ops:
        for key, value in getattr(op, attr).items():
            if key in out and out[key] != value:
                return f"{attr[:-1] if attr.endswith('s') else attr} {key} differs ({out[key]!r} vs {value!r})"
            out[key] = value
    return out


def _build(graph: Graph, m: _Match, iface_id: str, iface: dict[str, Any], readers: dict[str, list[int]]
           ) -> tuple[OpNode, list[str]] | str:
    """The fused OpNode of a match and the internal tensors it drops, or the reason it cannot be fused."""
    ops = [graph.ops[i] for i in m.idx]
    first, last = m.idx[0], m.idx[-1]
    if len({op.rows_last for op in ops}) != 1:
        return "the matched ops differ in rows (all vs last)"
    dims, dynamic, params, keys = (_union(ops, a) for a in ("dims", "dynamic_dims", "params", "policy_keys"))
    for part in (dims, dynamic, params, keys):
        if isinstance(part, str):
            return part
    assert isinstance(dims, dict) and isinstance(dynamic, dict) and isinstance(params, dict) and isinstance(keys, dict)
    inside = set(m.idx)
    node = OpNode(label=".".join([ops[0].label, *(op.cname for op in ops[1:])]),
                  cname=c_ident(f"f_{ops[0].cname}"), op=m.rule.fused_op, layer=ops[0].layer,
                  interface=iface_id, inputs={}, outputs={}, dims=dims, dynamic_dims=dynamic, params=params,
                  policy_keys=keys, rows_last=ops[0].rows_last, inserted_by=f"fusion:{m.rule.id}")
    dropped: list[str] = []
    for k, (op, step) in enumerate(zip(ops, m.rule.pattern, strict=True)):
        ports = dict(step.ports)
        for port, tname in op.inputs.items():
            if step.via and port == step.via[1]:
                continue
            node.inputs[ports[port]] = tname
        for port, ref in op.weights.items():
            node.weights[ports[port]] = ref
        for port, sname in op.state.items():
            node.state[ports[port]] = sname
        link = m.rule.pattern[k + 1].via if k + 1 < len(ops) else None
        for port, tname in op.outputs.items():
            between = [j for j in readers.get(tname, []) if first < j < last and j not in inside]
            if between:
                return f"{graph.ops[between[0]].label} reads {tname} between the matched ops"
            if link and port == link[0] and port not in ports:
                others = [j for j in readers.get(tname, []) if j not in inside]
                if others or tname in graph.outputs.values():
                    who = graph.ops[others[0]].label if others else "a graph output"
                    return f"intermediate {tname} is also read by {who}"
                dropped.append(tname)
                continue
            node.outputs[ports[port]] = tname
    for port, spec in iface["ports"].items():
        if spec["role"] in ("input", "output"):
            tname = node.inputs.get(port) or node.outputs.get(port)
            shape = graph.tensors[tname].shape if tname else None
        elif spec["role"] == "weight":
            shape = node.weights[port].shape
        else:
            continue
        want = tuple(int(evaluate(d, dims)) for d in spec["shape"])
        got = (1, *shape[1:]) if node.rows_last and spec["role"] == "input" and len(shape) > 1 else tuple(shape)
        if want != got:
            return f"port {port} has shape {list(got)}, {iface_id} wants {list(want)}"
    return node, dropped


def fuse(graph: Graph, rules: Sequence[FusionRule], available: Any, *, interfaces: Interfaces | None = None,
         contracts: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """Apply the highest-priority non-overlapping matches of `rules` to `graph`; return trace records.

    Without `contracts` this is the logical stage (right after hydrate): only logical-stage rules run.
    With the scheduler's `contracts` (label -> contract) only scheduled-stage rules run, each step may
    match on its op's contract, and `contracts` is updated in place (the fused op gets the rule's
    contract, the replaced ops' entries go). `available` is a kernel_table.AvailableKernels. Records are
    {rule, decision: applied|skipped, reason, ops, priority} in rule-id then graph order. Two matches
    of equal priority over a common op are a PlanError naming both rules; a capability the runtime
    cannot probe is a PlanError naming the rule.
    """
    interfaces = interfaces or load_interfaces()
    resolved = next((op for op in graph.ops if op.provider is not None), None)
    if resolved is not None:
        raise PlanError("fusion runs on the logical graph, before resolution", pointer=resolved.label,
                        value=resolved.provider, hint="call fuse right after hydrate, before schedule")
    records: list[dict[str, Any]] = []
    readers = _readers(graph)
    matches: list[_Match] = []
    shapes: dict[str, tuple[str, dict[str, Any]]] = {}

    def record(rule: FusionRule, decision: str, reason: str, idx: Sequence[int] = ()) -> None:
        records.append({"rule": rule.id, "decision": decision, "reason": reason, "priority": rule.priority,
                        "ops": [graph.ops[i].label for i in idx]})

    stage = "logical" if contracts is None else "scheduled"
    for rule in sorted((r for r in rules if r.stage == stage), key=lambda r: r.id):
        shapes[rule.id] = _check_shape(rule, interfaces, graph.phase)
        unmet = _unmet(rule, available)
        if not rule.enabled:
            record(rule, "skipped", "disabled for this CPU class")
            continue
        if unmet:
            record(rule, "skipped", "not available: " + ", ".join(unmet))
            continue
        found = _find(graph, rule, readers, contracts)
        if not found:
            record(rule, "skipped", "no match in this graph")
        matches.extend(_Match(rule, idx) for idx in found)
    built: dict[int, tuple[OpNode, list[str]]] = {}
    valid: list[_Match] = []
    for m in matches:
        made = _build(graph, m, *shapes[m.rule.id], readers)
        if isinstance(made, str):
            record(m.rule, "skipped", made, m.idx)
        else:
            built[id(m)] = made
            valid.append(m)
    by_op: dict[int, list[_Match]] = {}
    for m in valid:
        for i in m.idx:
            by_op.setdefault(i, []).append(m)
    for i in sorted(by_op):
        group = by_op[i]
        for a in range(len(group)):
            for b in range(a + 1, len(group)):
                x, y = group[a], group[b]
                if x.rule.priority == y.rule.priority:
                    first, second = sorted([x.rule.id, y.rule.id])
                    who = (f"fusion rule \"{first}\" matches twice" if first == second else
                           f"fusion rules \"{first}\" and \"{second}\" match")
                    raise PlanError(f"{who} overlapping ops "
                                    f"({graph.ops[i].label}) with equal priority {x.rule.priority}",
                                    path=x.rule.source.partition("#")[0], pointer=graph.ops[i].label,
                                    hint="give one of them a higher priority for this CPU class")
    graph_labels = [op.label for op in graph.ops]
    taken: dict[int, _Match] = {}
    chosen: list[tuple[_Match, OpNode, list[str]]] = []
    for m in sorted(valid, key=lambda m: (-m.rule.priority, m.idx, m.rule.id)):
        clash = next((taken[i] for i in m.idx if i in taken), None)
        if clash is not None:
            record(m.rule, "skipped", f"overlaps {clash.rule.id} (priority {clash.rule.priority})", m.idx)
            continue
        for i in m.idx:
            taken[i] = m
        chosen.append((m, *built[id(m)]))
        record(m.rule, "applied", f"priority {m.rule.priority}", m.idx)
    _rewrite(graph, chosen)
    if contracts is not None:
        for m, node, _dropped in chosen:
            for i in m.idx:
                contracts.pop(graph_labels[i], None)
            contracts[node.label] = str(m.rule.contract)
    return sorted(records, key=lambda r: (r["rule"], r["ops"], r["decision"]))


def _rewrite(graph: Graph, chosen: list[tuple[_Match, OpNode, list[str]]]) -> None:
    at_last: dict[int, OpNode] = {}
    gone: set[int] = set()
    for m, node, dropped in chosen:
        at_last[m.idx[-1]] = node
        gone.update(m.idx)
        for tname in dropped:
            del graph.tensors[tname]
        for tname in node.outputs.values():
            graph.tensors[tname].producer = node.label
    new_ops = []
    for i, op in enumerate(graph.ops):
        if i in at_last:
            new_ops.append(at_last[i])
        elif i not in gone:
            new_ops.append(op)
    graph.ops[:] = new_ops


def fuse_for_target(graph: Graph, registry: Any, isa: frozenset[str], *, cpu_class: str | None = None,
                    interfaces: Interfaces | None = None, contracts: dict[str, str] | None = None
                    ) -> list[dict[str, Any]]:
    """The compile-pipeline entry: the CPU class's rules, a probe of every kernel they name, then `fuse`.

    Call it right after hydrate (logical stage) and, with the scheduler's contracts, right after
    schedule (scheduled stage). The probed library holds every host-runnable variant of every map a
    rule names (built once per content hash), so whether a fused kernel counts as present never
    depends on what a plan launches.
    """
    from kernelmap.runtime.kernel_table import available_kernels

    if cpu_class is None:
        from kernelmap.target import host_class

        cpu_class = host_class(isa)
    rules = load_rules(cpu_class)
    named = sorted({cap.partition(":")[2] for rule in rules for cap in rule.requires
                    if cap.startswith("kernel:") and cap.partition(":")[2] in registry.providers})
    available = available_kernels(registry, frozenset(isa), only=named)
    return fuse(graph, rules, available, interfaces=interfaces, contracts=contracts)
