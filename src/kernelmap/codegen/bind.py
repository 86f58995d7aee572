"""Call-ABI binding: turn each selected provider's `call_abi` into a C argument list and a prototype.

Input: a resolved op (provider map, variant symbol), the phase's memory plan, weight offsets and
state indices. Output: C expressions, one per ABI parameter, built only from derived identifiers,
integer literals and exact hex-float literals — never from model-file or map text. Binding fails
closed (PlanError) when a source cannot be resolved.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from kernelmap.circuits.graph import Graph, OpNode
from kernelmap.circuits.hydrate import row_bytes
from kernelmap.errors import PlanError
from kernelmap.weights.manifest import weight_name

__all__ = ["C_KEYWORDS", "BoundCall", "bind_call", "c_type_of", "c_comment", "check_ident", "check_param_name",
           "float_literal", "prototype", "weight_location"]

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
_LABEL = re.compile(r"^[A-Za-z0-9_.]{1,128}$")
_CAST = re.compile(r"^(const )?(void|float|int8_t|int16_t|int32_t|int64_t|uint8_t|uint16_t) ?\*$")
_SCALAR_CAST = {"float": "float", "int64_t": "int64_t", "int32_t": "int32_t", "int": "int", "double": "double"}
_PARAM_TYPES = {"float": "float", "int64": "int64_t", "int32": "int32_t"}
_RUNTIME = {"ith": ("ith", "int"), "nth": ("nth", "int"), "n_tokens": ("n_tokens", "int64_t"),
            "pos": ("pos", "int64_t"), "n_ctx": ("m->n_ctx", "int64_t"),
            # the cells of the op's KV state buffers (codegen/ring.py: the context, or a ring's cells)
            "kv_cells": ("m->state_cells[{state}]", "int64_t"),
            # batch phase: per-row positions and KV slots (one int64 per row; only the batch entry has them)
            "positions": ("positions", "const int64_t *"), "slots": ("slots", "const int64_t *")}


def check_ident(text: str) -> str:
    """Refuse anything that is not a plain C identifier."""
    if not _IDENT.match(text):
        raise PlanError("refusing to emit a non-identifier into C", value=text)
    return text


# C keywords (C11 and the gcc extensions a kernel source may use): never a parameter name.
C_KEYWORDS = frozenset("""auto break case char const continue default do double else enum extern float for goto if
inline int long register restrict return short signed sizeof static struct switch typedef union unsigned void
volatile while _Alignas _Alignof _Atomic _Bool _Complex _Generic _Imaginary _Noreturn _Static_assert
_Thread_local asm typeof __asm__ __typeof__ __attribute__ __restrict __inline__ __extension__""".split())


def check_param_name(text: str) -> str:
    """A C parameter name as the generated prototype declares it: an identifier that is not a keyword."""
    if text in C_KEYWORDS:
        raise PlanError("refusing a C keyword as a parameter name", value=text)
    return check_ident(text)


def check_label(text: str) -> str:
    """Refuse op labels outside [A-Za-z0-9_.] (labels are emitted as C string literals)."""
    if not _LABEL.match(text):
        raise PlanError("refusing to emit a label with unsafe characters into C", value=text)
    return text


def c_comment(text: str) -> str:
    """Make arbitrary text safe inside a C block comment: ASCII printable only, no */, no backslashes."""
    clean = "".join(ch for ch in str(text) if 32 <= ord(ch) < 127 and ch != "\\")
    while "*/" in clean or "/*" in clean:
        clean = clean.replace("*/", "* /").replace("/*", "/ *")
    return clean.replace("??", "? ?")


def float_literal(value: float) -> str:
    """An exact C float literal (hex) for the f32 rounding of `value`."""
    with np.errstate(over="ignore"):  # a value beyond f32's range becomes inf, refused below (no warning)
        f = float(np.float32(value))
    if not np.isfinite(f):
        raise PlanError("parameter is not finite in f32", value=value)
    return f"{f.hex()}f" if f != 0.0 else "0.0f"


def c_type_of(entry: dict[str, Any], spec: dict[str, Any]) -> str:
    """The C type of one call_abi parameter (from its cast, or from its source kind)."""
    cast = entry.get("cast")
    kind, _, name = entry["source"].partition(":")
    if cast:
        if _CAST.match(cast):
            return cast
        if cast in _SCALAR_CAST:
            return _SCALAR_CAST[cast]
        raise PlanError("call_abi cast is not an allowed C type", path=spec.get("id"),
                        pointer="/call_abi/params", value=cast)
    if kind in ("output", "state", "scratch"):
        return "void *"
    if kind in ("activation", "weight", "weight_opt"):
        return "const void *"
    if kind in ("dim", "const"):
        return "int64_t"
    if kind == "runtime":
        if name not in _RUNTIME:
            raise PlanError("unknown runtime source", path=spec.get("id"), value=entry["source"],
                            expected=sorted(_RUNTIME))
        return _RUNTIME[name][1]
    if kind == "param":
        types = {p["name"]: p["type"] for p in spec.get("params", [])}
        if types.get(name) not in _PARAM_TYPES:
            raise PlanError("param has no known C type", path=spec.get("id"), value=name)
        return _PARAM_TYPES[types[name]]
    raise PlanError("unknown call_abi source kind", path=spec.get("id"), value=entry["source"])


def prototype(spec: dict[str, Any], symbol: str) -> str:
    """The C prototype of a kernel from its map's call_abi alone (types and parameter names): what the
    generated model declares and what each kernel unit is compiled against."""
    check_ident(symbol)
    types = []
    for entry in spec["call_abi"]["params"]:
        ctype = c_type_of(entry, spec)
        types.append(f"{ctype}{'' if ctype.endswith('*') else ' '}{check_param_name(entry['name'])}")
    return f"void {symbol}({', '.join(types) if types else 'void'});"


@dataclass(frozen=True)
class BoundCall:
    """One emitted kernel call: the symbol, its argument expressions, and its C prototype."""

    symbol: str
    args: tuple[str, ...]
    prototype: str


WEIGHT_BASES = {"W": "weights.bin", "G": "the GGUF file"}  # the generated program's two weight mappings


def weight_location(value: int | tuple[str, int]) -> tuple[str, int]:
    """(base pointer, byte offset) of a weight: an int is an offset in weights.bin (W); ("G", n) is the
    absolute offset n of a tensor mapped from the GGUF file itself."""
    base, off = ("W", value) if isinstance(value, int) else value
    if base not in WEIGHT_BASES or isinstance(off, bool) or not isinstance(off, int) or off < 0:
        raise PlanError("weight location is not (W|G, offset >= 0)", value=repr(value))
    return base, off


def _row_offset(graph: Graph, tname: str) -> str:
    t = graph.tensors[tname]
    return f" + (size_t)(n_tokens - 1) * {row_bytes(t.dtype, t.shape[-1])}u"


def bind_call(op: OpNode, spec: dict[str, Any], symbol: str, graph: Graph, offsets: dict[str, int],
              weight_offsets: dict[str, Any], state_index: dict[str, int]) -> BoundCall:
    """Resolve every call_abi source of `spec` for `op` into a C expression."""
    proto = prototype(spec, symbol)
    args: list[str] = []
    for i, entry in enumerate(spec["call_abi"]["params"]):
        ctype = c_type_of(entry, spec)
        kind, _, name = entry["source"].partition(":")
        where = f"{op.label}: {spec['id']} /call_abi/params/{i}"
        ptr_cast = f"({ctype})" if "*" in ctype else ""
        if kind == "output":
            tname = op.outputs.get(name)
            if tname is None:
                raise PlanError(f"{where}: op has no output port '{name}'", value=entry["source"])
            expr = f"{ptr_cast}(A + {offsets[tname]}u)"
        elif kind == "activation":
            tname = op.inputs.get(name)
            if tname is None:
                raise PlanError(f"{where}: op has no input port '{name}'", value=entry["source"])
            extra = _row_offset(graph, tname) if op.rows_last and graph.tensors[tname].rows_dynamic else ""
            expr = f"{ptr_cast}(A + {offsets[tname]}u{extra})"
        elif kind in ("weight", "weight_opt"):
            ref = op.weights.get(name)
            if ref is None:
                if kind == "weight_opt":
                    expr = "NULL"
                else:
                    raise PlanError(f"{where}: op has no weight port '{name}'", value=entry["source"])
            else:
                layout = next((p["layout"] for p in spec.get("weights", ()) if p["name"] == name), "")
                base, off = weight_location(weight_offsets[weight_name(ref.cname, layout)])
                expr = f"{ptr_cast}({base} + UINT64_C({off}))"
        elif kind == "state":
            sname = op.state.get(name)
            if sname is None:
                raise PlanError(f"{where}: op has no state port '{name}'", value=entry["source"])
            expr = f"{ptr_cast}m->state[{state_index[sname]}]"
        elif kind == "scratch":
            key = f"{op.cname}__scratch_{name}"
            if key not in offsets:
                raise PlanError(f"{where}: scratch '{name}' was not planned", value=entry["source"])
            expr = f"{ptr_cast}(A + {offsets[key]}u)"
        elif kind == "dim":
            if name in op.dynamic_dims:
                expr = _RUNTIME[op.dynamic_dims[name]][0]
            elif name in op.dims:
                expr = f"INT64_C({int(op.dims[name])})"
            else:
                raise PlanError(f"{where}: dim '{name}' is not bound for this op", value=sorted(op.dims))
        elif kind == "param":
            if name not in op.params:
                raise PlanError(f"{where}: param '{name}' is not set by the circuit", value=sorted(op.params))
            value = op.params[name]
            expr = float_literal(value) if ctype == "float" else f"INT64_C({int(value)})"
        elif kind == "runtime" and name == "kv_cells":
            if not op.state:
                raise PlanError(f"{where}: runtime:kv_cells needs a state port bound to a buffer", value=op.label)
            expr = _RUNTIME[name][0].format(state=state_index[next(iter(op.state.values()))])
        elif kind == "runtime" and name == "pos" and op.rows_last:
            # a last-row op computes only the step's last row (M = 1 at the row offset of _row_offset): its
            # position is the step's last, not its first
            expr = "(pos + n_tokens - 1)"
        elif kind == "runtime":
            expr = _RUNTIME[name][0]
        elif kind == "const":
            if not re.fullmatch(r"-?[0-9]{1,18}", name):
                raise PlanError(f"{where}: const source is not an integer", value=name)
            expr = f"INT64_C({int(name)})"
        else:
            raise PlanError(f"{where}: unknown source kind", value=entry["source"])
        args.append(expr)
    return BoundCall(symbol, tuple(args), proto)
