"""Numerics stage: a policy file (data) -> the numerical contract each op instance must follow.

Input: `policies/<name>.json` (or any path) and, per op instance, the keys the planner knows (weight
dtype, activation target, RoPE style, ...). Output: the one matching `Rule` (contract, activation
dtype the op's input must be quantized to, KV-cache dtype). A policy may extend a shipped one: its
rules replace the base's rules of the same op and match keys, the rest are inherited. It does not
pick kernels; priority never chooses numerics. Zero or several matching rules fail closed.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from jsonschema import Draft202012Validator

from kernelmap.errors import PolicyError, closest
from kernelmap.maps.loader import check_schema, parse_json

__all__ = ["POLICY_DIR", "Policy", "Rule", "load_policy", "policy_names"]

POLICY_DIR = Path(__file__).resolve().parent / "policies"
SCHEMA_PATH = Path(__file__).resolve().parent / "policy.schema.json"


@functools.lru_cache(maxsize=1)
def _validator() -> Draft202012Validator:
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


@dataclass(frozen=True)
class Rule:
    """One policy rule: for `op` when every `match` key equals the request's, follow `contract`."""

    op: str
    match: tuple[tuple[str, str], ...]
    contract: str
    activation: str | None
    kv: str | None
    pointer: str

    def matches(self, keys: Mapping[str, str]) -> bool:
        """True when every match key is present in `keys` with the same value."""
        return all(keys.get(k) == v for k, v in self.match)

    def describe(self) -> str:
        """`op` plus its match keys, e.g. `linear weight=q4_k`."""
        return " ".join([self.op, *(f"{k}={v}" for k, v in self.match)]) if self.match else self.op


@dataclass(frozen=True)
class Policy:
    """A loaded numerics policy: its rules by op, its file and the sha256 of its bytes."""

    name: str
    path: Path
    rules: tuple[Rule, ...]
    hash: str

    @property
    def ops(self) -> tuple[str, ...]:
        """Every op the policy has a rule for, sorted."""
        return tuple(sorted({r.op for r in self.rules}))

    def rule_for(self, op: str, **keys: str) -> Rule:
        """The single rule for `op` whose match keys all equal `keys`; PolicyError if none or several."""
        shown = ", ".join(f"{k}={v}" for k, v in sorted(keys.items())) or "no keys"
        candidates = [r for r in self.rules if r.op == op]
        if not candidates:
            near = closest(op, self.ops)
            raise PolicyError(f"no rule for op \"{op}\" ({shown})", path=self.path, pointer="/rules",
                              expected=list(self.ops), hint=f"closest: {near}" if near else
                              f"policy {self.name} does not cover this op; add a rule or use another policy")
        hits = [r for r in candidates if r.matches(keys)]
        if len(hits) == 1:
            return hits[0]
        if not hits:
            known = "; ".join(r.describe() for r in candidates)
            raise PolicyError(f"no rule for op \"{op}\" with {shown}", path=self.path, pointer="/rules",
                              expected=known,
                              hint=f"policy {self.name} refuses this combination (no fallback); "
                                   "use another policy or add a rule")
        raise PolicyError(f"{len(hits)} rules match op \"{op}\" with {shown}: "
                          + ", ".join(h.pointer for h in hits), path=self.path, pointer=hits[0].pointer,
                          hint="make the rules' match keys disjoint")


def policy_names() -> list[str]:
    """Names of the policies shipped in the package."""
    return sorted(p.stem for p in POLICY_DIR.glob("*.json"))


def _resolve_path(name_or_path: str | Path) -> Path:
    text = str(name_or_path)
    if isinstance(name_or_path, Path) or "/" in text or text.endswith(".json"):
        return Path(text)
    path = POLICY_DIR / f"{text}.json"
    if not path.is_file():
        near = closest(text, policy_names())
        raise PolicyError("unknown numerics policy", pointer=None, value=text, expected=policy_names(),
                          hint=f"closest: {near}" if near else "pass a policy name or a path to a .json file")
    return path


def load_policy(name_or_path: str | Path = "llama-cpu") -> Policy:
    """Load a shipped policy by name (`llama-cpu`, `f32-reference`) or any policy file by path."""
    return _load(_resolve_path(name_or_path), ())


def _load(path: Path, chain: tuple[str, ...]) -> Policy:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise PolicyError(f"cannot read policy: {exc.strerror}", path=path) from None
    doc = parse_json(data, path, PolicyError)
    check_schema(_validator(), doc, path, PolicyError)
    own = [Rule(r["op"], tuple(sorted(r["match"].items())), r["contract"], r.get("activation"), r.get("kv"),
                f"/rules/{i}") for i, r in enumerate(doc["rules"])]
    base_hash = b""
    rules: list[Rule] = []
    if "extends" in doc:
        base_name = doc["extends"]
        if base_name in chain or base_name == doc["name"]:
            raise PolicyError("policy extends itself", path=path, pointer="/extends",
                              value=" -> ".join((*chain, doc["name"], base_name)))
        base = _load(_resolve_path(base_name), (*chain, doc["name"]))
        replaced = {(r.op, r.match) for r in own}
        rules = [replace(r, pointer=f"{base_name}:{r.pointer}") for r in base.rules if (r.op, r.match) not in replaced]
        base_hash = base.hash.encode()
    for rule in own:
        for other in rules:
            if other.op == rule.op and set(other.match) <= set(rule.match):
                raise PolicyError(f"rule overlaps {other.pointer} ({other.describe()}): any request "
                                  f"matching it would match both", path=path, pointer=rule.pointer,
                                  value=rule.describe(), hint="make the rules' match keys disjoint")
            if other.op == rule.op and set(rule.match) <= set(other.match):
                raise PolicyError(f"rule overlaps {other.pointer} ({other.describe()}): any request "
                                  f"matching that rule would match both", path=path, pointer=rule.pointer,
                                  value=rule.describe(), hint="make the rules' match keys disjoint")
        rules.append(rule)
    digest = hashlib.sha256(data + (b"\0extends\0" + base_hash if base_hash else b"")).hexdigest()
    return Policy(doc["name"], path, tuple(rules), digest)
