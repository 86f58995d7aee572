"""Resolve stage input: one op instance in one phase, as the planner (or `kernelmap resolve`) asks for it.

A `Request` is immutable and validated on construction; `from_dict`/`to_dict` give its stable JSON
form (the one recorded in the selection trace). It does not decide anything (filter/rank do).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from kernelmap.errors import RequestError, closest
from kernelmap.maps.expr import Bound

__all__ = ["PHASES", "STATUSES", "Request"]

PHASES = ("init", "prefill", "decode")
STATUSES = ("production", "candidate", "diagnostic", "deprecated")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_WORD = re.compile(r"^[a-z0-9_]+$")
_DOTTED = re.compile(r"^[a-z0-9_]+(\.[a-z0-9_]+)*\.v[0-9]+$")
_LABEL = re.compile(r"^[A-Za-z0-9_.:\-\[\]/]{1,200}$")


@dataclass(frozen=True)
class Request:
    """One op instance to resolve: what it computes, in which phase, with which ports, dims and ISA.

    ports: port name -> (dtype, layout); only named ports are checked. dims: dim name -> one
    non-negative integer, or the inclusive range (lo, hi) of values a dim takes at run time (rows of a
    prefill chunk: (1, max_rows)); a constraint must hold over the whole range, and one on a dim the
    request does not give is unevaluable, which rejects the provider. aliases: (output port, input
    port) pairs the planner wants computed in place. allow_status: lifecycles that may be selected.
    """

    op: str
    phase: str
    contract: str | None = None
    interface: str | None = None
    ports: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    dims: Mapping[str, Bound] = field(default_factory=dict)
    aliases: frozenset[tuple[str, str]] = frozenset()
    allow_status: frozenset[str] = frozenset({"production"})
    isa: frozenset[str] = frozenset()
    label: str = ""

    def __post_init__(self) -> None:
        label = self.label or self.op
        set_ = object.__setattr__
        set_(self, "label", label)

        def bad(pointer: str, message: str, **kw: Any) -> RequestError:
            return RequestError(message, path=label if isinstance(label, str) else None, pointer=pointer, **kw)

        if not isinstance(label, str) or not _LABEL.match(label):
            raise RequestError("malformed op label", pointer="/label", value=label,
                               expected="1-200 characters from [A-Za-z0-9_.:-[]/]")
        if not isinstance(self.op, str) or not _WORD.match(self.op):
            raise bad("/op", "malformed op name", value=self.op, expected="[a-z0-9_]+")
        if self.phase not in PHASES:
            near = closest(str(self.phase), PHASES)
            raise bad("/phase", "unknown phase", value=self.phase, expected=list(PHASES),
                      hint=f"closest: {near}" if near else None)
        for key in ("contract", "interface"):
            val = getattr(self, key)
            if val is not None and (not isinstance(val, str) or not _DOTTED.match(val)):
                raise bad(f"/{key}", f"malformed {key}", value=val, expected="dotted name ending in .v<N>")
        if not isinstance(self.ports, Mapping) or not isinstance(self.dims, Mapping):
            raise bad("/ports" if not isinstance(self.ports, Mapping) else "/dims", "must be a mapping")
        ports: dict[str, tuple[str, str]] = {}
        for name in sorted(self.ports, key=str):
            spec = self.ports[name]
            if not isinstance(name, str) or not _NAME.match(name):
                raise bad(f"/ports/{name}", "malformed port name", value=name)
            if (not isinstance(spec, (tuple, list)) or len(spec) != 2
                    or not all(isinstance(s, str) and _WORD.match(s) for s in spec)):
                raise bad(f"/ports/{name}", "a port must be (dtype, layout)", value=spec)
            ports[name] = (spec[0], spec[1])
        set_(self, "ports", MappingProxyType(ports))
        set_(self, "port_items", tuple(ports.items()))
        dims: dict[str, Bound] = {}
        for name in sorted(self.dims, key=str):
            val = self.dims[name]
            if not isinstance(name, str) or not _NAME.match(name):
                raise bad(f"/dims/{name}", "malformed dim name", value=name)
            if isinstance(val, (tuple, list)) and len(val) == 2 and all(_nonneg(v) for v in val):
                lo, hi = int(val[0]), int(val[1])
                if lo > hi:
                    raise bad(f"/dims/{name}", "a dim range must have lo <= hi", value=list(val))
                dims[name] = lo if lo == hi else (lo, hi)
            elif _nonneg(val):
                dims[name] = val
            else:
                raise bad(f"/dims/{name}", "a dim must be a non-negative integer or a range [lo, hi] of them",
                          value=val)
        set_(self, "dims", MappingProxyType(dims))
        pairs = []
        for a in self.aliases:
            if (not isinstance(a, (tuple, list)) or len(a) != 2
                    or not all(isinstance(s, str) and _NAME.match(s) for s in a)):
                raise bad("/aliases", "an alias must be (output port, input port)", value=a)
            pairs.append((a[0], a[1]))
        aliases = frozenset(pairs)
        set_(self, "aliases", aliases)
        set_(self, "alias_list", tuple(sorted(aliases)))
        set_(self, "_dict", None)
        for s in self.allow_status:
            if s not in STATUSES:
                raise bad("/allow_status", "unknown status", value=s, expected=list(STATUSES))
        allow = frozenset(self.allow_status)
        if not allow:
            raise bad("/allow_status", "allow_status is empty", expected=list(STATUSES))
        set_(self, "allow_status", allow)
        for f in self.isa:
            if not isinstance(f, str) or not _WORD.match(f):
                raise bad("/isa", "malformed isa feature", value=f, expected="[a-z0-9_]+")
        set_(self, "isa", frozenset(self.isa))

    def __hash__(self) -> int:
        return hash((self.label, self.op, self.phase, self.contract, self.interface, self.port_items,
                     tuple(self.dims.items()), self.alias_list, self.allow_status, self.isa))

    def to_dict(self) -> dict[str, Any]:
        """Stable JSON form (sorted lists) as written in the trace; built once, treat it as read-only."""
        cached = self.__dict__.get("_dict")
        if cached is not None:
            return cached
        out = {
            "label": self.label, "op": self.op, "phase": self.phase, "contract": self.contract,
            "interface": self.interface,
            "ports": {k: {"dtype": d, "layout": lay} for k, (d, lay) in self.ports.items()},
            "dims": {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.dims.items()},
            "aliases": [list(a) for a in sorted(self.aliases)],
            "allow_status": sorted(self.allow_status), "isa": sorted(self.isa),
        }
        object.__setattr__(self, "_dict", out)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Request:
        """Inverse of `to_dict`; unknown keys and wrong shapes raise RequestError."""
        if not isinstance(data, Mapping):
            raise RequestError("a request must be an object", pointer="", value=data)
        allowed = ("label", "op", "phase", "contract", "interface", "ports", "dims", "aliases",
                   "allow_status", "isa")
        for key in sorted(data):
            if key not in allowed:
                near = closest(str(key), allowed)
                raise RequestError(f"unknown request field \"{key}\"", pointer=f"/{key}",
                                   hint=f"did you mean \"{near}\"?" if near else None)
        for key in ("op", "phase"):
            if key not in data:
                raise RequestError(f"missing request field \"{key}\"", pointer=f"/{key}")
        ports_in = data.get("ports", {})
        if not isinstance(ports_in, Mapping):
            raise RequestError("ports must be an object", pointer="/ports", value=ports_in)
        ports: dict[str, tuple[str, str]] = {}
        for name, spec in ports_in.items():
            if isinstance(spec, Mapping) and set(spec) == {"dtype", "layout"}:
                ports[name] = (spec["dtype"], spec["layout"])
            elif isinstance(spec, (list, tuple)) and len(spec) == 2:
                ports[name] = (spec[0], spec[1])
            else:
                raise RequestError("a port must be {dtype, layout}", pointer=f"/ports/{name}", value=spec)
        dims = data.get("dims", {})
        if not isinstance(dims, Mapping):
            raise RequestError("dims must be an object", pointer="/dims", value=dims)
        return cls(
            op=data["op"], phase=data["phase"], contract=data.get("contract"),
            interface=data.get("interface"), ports=ports, dims=dict(dims),
            aliases=_seq(data.get("aliases", []), "/aliases"),
            allow_status=frozenset(_seq(data.get("allow_status", ["production"]), "/allow_status")),
            isa=frozenset(_seq(data.get("isa", []), "/isa")), label=data.get("label", ""),
        )


def _nonneg(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _seq(value: Any, pointer: str) -> list[Any]:
    """A JSON list as a list of hashable items (inner lists become tuples); anything else is refused."""
    if not isinstance(value, (list, tuple, set, frozenset)):
        raise RequestError("expected a list", pointer=pointer, value=value)
    out = []
    for item in value:
        if isinstance(item, list):
            item = tuple(item)
        try:
            hash(item)
        except TypeError:
            raise RequestError("malformed list item", pointer=pointer, value=item) from None
        out.append(item)
    return out
