"""Hydration: circuit file + model config + tensor table -> the logical graph of one phase.

Reads the config values the circuit names (GGUF keys, defaults, derived expressions), evaluates
per-layer attributes, expands the layer block `n_layers` times, binds every op's dims by unifying its
interface's port shapes with the tensors it reads, and checks every shape. It does not choose kernels,
insert quantizers or plan memory (those are the scheduler's, resolver's and planner's jobs).
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from kernelmap.circuits.expr import EvaluationError, Expr, evaluate
from kernelmap.circuits.graph import Graph, OpNode, StateBuf, Tensor, WeightRef
from kernelmap.circuits.loader import Circuit, Interfaces
from kernelmap.errors import CircuitError, ModelError
from kernelmap.gguf.types import by_name, unknown_type_error

__all__ = ["read_config", "check_keys", "tensors_read", "op_active", "hydrate", "TensorTable", "c_ident", "QUANTIZED",
           "row_bytes", "weight_layout"]

C_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
QUANTIZED = {"q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1", "q8_0", "q2_k", "q3_k", "q4_k", "q5_k", "q6_k", "q8_k"}


class TensorInfoLike(Protocol):
    type_name: str
    shape: tuple[int, ...]


TensorTable = Mapping[str, TensorInfoLike]


def c_ident(text: str) -> str:
    """Check that a derived name is a plain C identifier (never a copy of model-file text)."""
    if not C_IDENT.match(text):
        raise CircuitError("derived name is not a C identifier", value=text,
                           expected="[A-Za-z_][A-Za-z0-9_]{0,63}")
    return text


def row_bytes(dtype: str, cols: int) -> int:
    """Bytes of one row of `cols` values in `dtype` (blocks for quantized types)."""
    ggml = by_name(dtype)  # the GGML type table of the GGUF reader
    if ggml is None:
        raise ModelError("unsupported dtype", value=dtype)
    block, size = ggml.block_size, ggml.type_size
    if cols % block:
        raise ModelError(f"row of {cols} values is not a whole number of {dtype} blocks", value=cols,
                         expected=f"a multiple of {block}")
    return cols // block * size


def _cast(value: Any, kind: str, where: str, pointer: str) -> Any:
    try:
        if kind == "int":
            if isinstance(value, bool) or not float(value).is_integer():
                raise ValueError
            return int(value)
        if kind == "float":
            return float(value)
        if kind == "bool":
            if not isinstance(value, bool):
                raise ValueError
            return value
        return str(value)
    except (TypeError, ValueError):
        raise ModelError(f"config value has the wrong type (expected {kind})", path=where, pointer=pointer,
                         value=value) from None


def read_config(circuit: Circuit, metadata: Mapping[str, Any], tensors: TensorTable,
                *, source: str = "<model>") -> dict[str, Any]:
    """Evaluate the circuit's `config` block against GGUF metadata and the tensor table.

    Every value read from the file is checked before anything uses it: its GGUF value type, float
    finiteness and the entry's bounds; then the circuit's checks, the layer count against the layers
    the tensor table holds (before any loop over layers), and the circuit's `tensor_shapes` (a key that
    contradicts a tensor is refused by the key's name). Fails closed on the file as a whole: a metadata
    key of the architecture that changes the arithmetic and that the circuit does not read
    (gguf_keys.json), a tensor no op of the circuit reads, and a read tensor of an unknown GGML type are
    refused by name.
    """
    arch = circuit.architecture
    cfg: dict[str, Any] = {}
    where = str(circuit.path)
    for name, spec in circuit.data["config"].items():
        pointer = f"/config/{name}"
        kind = spec.get("type", "float")
        if "key" in spec:
            key = spec["key"].replace("{arch}", arch)
            if key in metadata:
                cfg[name] = _from_metadata(metadata, key, spec, kind, source)
            elif "default" in spec and kind == "str":
                cfg[name] = str(spec["default"])  # a literal: strings are not expressions
            elif "default" in spec:
                cfg[name] = _cast(_model_eval(circuit, spec["default"], cfg, pointer + "/default", source), kind, where,
                                  pointer)
            else:
                raise ModelError("required metadata key is missing", path=source, pointer=key,
                                 hint=f"the {arch} circuit reads it for '{name}'")
            allowed = spec.get("allowed", list(spec.get("values", {})) or None)
            if allowed is not None and cfg[name] not in allowed:
                raise ModelError(f"the {arch} circuit does not implement this value", path=source, pointer=key,
                                 value=cfg[name], expected=[str(v) for v in allowed])
            if "values" in spec:  # a string setting as the number the circuit's expressions test
                cfg[name] = spec["values"][cfg[name]]
        elif "value" in spec:
            cfg[name] = spec["value"]
        elif "expr" in spec:
            cfg[name] = _model_eval(circuit, spec["expr"], cfg, pointer, source)
        elif "tensor_dim" in spec:
            tname, axis = spec["tensor_dim"]
            info = tensors.get(tname)
            if info is None or axis >= len(info.shape):
                raise ModelError("tensor needed for a config value is missing", path=source, pointer=tname,
                                 hint=f"the {arch} circuit reads dim {axis} of it for '{name}'")
            cfg[name] = int(info.shape[axis])
        elif "tensor_exists" in spec:
            cfg[name] = spec["tensor_exists"] in tensors
        else:
            raise CircuitError("config entry has no key, value, expr, tensor_dim or tensor_exists", path=where,
                               pointer=pointer)
    for i, check in enumerate(circuit.data.get("checks", [])):
        if not _model_eval(circuit, check["expr"], cfg, f"/checks/{i}", source):
            names = sorted(Expr(check["expr"], where=where, pointer=f"/checks/{i}").names)
            raise ModelError(check["message"], path=source, pointer=_keys_of(circuit, check["expr"]) or "config",
                             value={n: cfg[n] for n in names}, expected=check["expr"])
    _check_layer_count(circuit, cfg, tensors, source)
    _check_tensor_shapes(circuit, cfg, tensors, source)
    check_keys(circuit, metadata, source=source)
    try:
        read = tensors_read(circuit, cfg, tensors)
    except EvaluationError as exc:  # a per-layer attribute failed on this model's values
        raise _blame_model(circuit, exc, source) from None
    unused = sorted(set(tensors) - read)
    if unused:
        raise ModelError(f"tensor is not read by the {arch} circuit ({len(unused)} such)", path=source,
                         pointer=unused[0], expected=f"only the tensors circuits/{circuit.path.name} reads")
    for tname in sorted(read):
        type_name = tensors[tname].type_name
        if type_name.startswith("unknown:"):
            raise unknown_type_error(int(type_name.partition(":")[2]), tensor=tname, path=source)
    return cfg


_INT_TYPES = ("uint8", "int8", "uint16", "int16", "uint32", "int32", "uint64", "int64")
# config entry type -> (the GGUF value types that may hold it, how the message spells them)
_GGUF_TYPES: dict[str, tuple[tuple[str, ...], str]] = {
    "int": (_INT_TYPES, "an integer type (" + ", ".join(_INT_TYPES) + ")"),
    "float": (("float32", "float64"), "float32 or float64"),
    "bool": (("bool",), "bool"),
    "str": (("string",), "string"),
    "length": ((), "an array"),
}
F32_MAX = 3.4028234663852886e38


def _value_type(metadata: Mapping[str, Any], key: str) -> str:
    """The GGUF value type of a metadata key (the reader's record; a plain dict's by its Python type)."""
    getter = getattr(metadata, "value_type", None)
    if callable(getter):
        return str(getter(key))
    value = metadata[key]
    for kind, name in ((bool, "bool"), (int, "int64"), (float, "float64"), (str, "string")):
        if isinstance(value, kind):
            return name
    return "array"


def _from_metadata(metadata: Mapping[str, Any], key: str, spec: Mapping[str, Any], kind: str, source: str) -> Any:
    """A config value read from the file: its GGUF type, float32 finiteness and the entry's bounds checked."""
    found = _value_type(metadata, key)
    types, spelled = _GGUF_TYPES[kind]
    if not (found.startswith("array") if kind == "length" else found in types):
        raise ModelError("metadata value has the wrong type", path=source, pointer=key, value=found, expected=spelled)
    value = metadata[key]
    if kind == "length":
        value = len(value)
    elif kind == "float":
        value = float(value)
        if not (math.isfinite(value) and abs(value) <= F32_MAX):  # kernels take every float parameter as f32
            raise ModelError("value is not finite in float32", path=source, pointer=key, value=value,
                             expected=f"a finite value of magnitude <= {F32_MAX:g}")
    if "min" in spec and value < spec["min"]:
        raise ModelError("value is out of range", path=source, pointer=key, value=value, expected=f">= {spec['min']}")
    if "above" in spec and not value > spec["above"]:
        raise ModelError("value is out of range", path=source, pointer=key, value=value, expected=f"> {spec['above']}")
    return value


def _keys_of(circuit: Circuit, text: Any, seen: set[str] | None = None) -> str:
    """The metadata keys an expression's value comes from (through config and layer_attrs expressions),
    comma-separated ("" if none does)."""
    if not isinstance(text, str):
        return ""
    seen = set() if seen is None else seen
    config, attrs = circuit.data["config"], circuit.data.get("layer_attrs", {})
    keys: list[str] = []
    for name in sorted(Expr(text, where=str(circuit.path)).names - seen):
        seen.add(name)
        spec = config.get(name, {})
        if "key" in spec:
            keys.append(spec["key"].replace("{arch}", circuit.architecture))
        inner = spec.get("expr") or attrs.get(name)
        if inner:
            keys += [k for k in _keys_of(circuit, inner, seen).split(", ") if k]
    return ", ".join(sorted(set(keys)))


def _blame_model(circuit: Circuit, exc: EvaluationError, source: str) -> ModelError:
    """An expression of the circuit that failed on this model's values, as the model file's error."""
    return ModelError(f"circuits/{circuit.path.name} {exc.pointer}: {exc.message} with this model's values",
                      path=source, pointer=_keys_of(circuit, exc.value) or "config", value=exc.value)


def _model_eval(circuit: Circuit, text: Any, env: Mapping[str, Any], pointer: str, source: str) -> Any:
    """Evaluate a circuit expression over values from the model file; an arithmetic failure is the file's."""
    try:
        return evaluate(text, env, where=str(circuit.path), pointer=pointer)
    except EvaluationError as exc:
        raise _blame_model(circuit, exc, source) from None


def _layer_patterns(circuit: Circuit) -> list[re.Pattern[str]]:
    """Regexes for the per-layer tensor names of the circuit's layer block; group 1 is the layer index."""
    names: set[str] = set()
    for spec in circuit.data["layer"]:
        for wspec in spec.get("weights", {}).values():
            names.update([wspec] if isinstance(wspec, str) else wspec.get("first_of", [wspec.get("tensor", "")]))
        names.update([spec["if_tensor"]] if "if_tensor" in spec else [])
    index = "(0|[1-9][0-9]{0,8})"
    return [re.compile(index.join(re.escape(part) for part in n.split("{layer}")) + "$") for n in sorted(names)
            if "{layer}" in n]


def _check_layer_count(circuit: Circuit, config: Mapping[str, Any], tensors: TensorTable, source: str) -> None:
    """Refuse a layer count other than the number of layers the tensor table holds (before any loop over it)."""
    patterns = _layer_patterns(circuit)
    present = {int(m.group(1)) for t in tensors for p in patterns for m in [p.match(t)] if m}
    count = max(present) + 1 if present else 0
    if int(config["n_layers"]) != count:
        spec = circuit.data["config"]["n_layers"]
        raise ModelError("layer count contradicts the tensor table", path=source,
                         pointer=spec["key"].replace("{arch}", circuit.architecture) if "key" in spec else "n_layers",
                         value=config["n_layers"], expected=f"the number of layers in the tensor table, {count}")


def _check_tensor_shapes(circuit: Circuit, config: Mapping[str, Any], tensors: TensorTable, source: str) -> None:
    """Check each tensor the circuit's `tensor_shapes` names (every layer's for {layer}) against the config."""
    for pattern, dims in circuit.data.get("tensor_shapes", {}).items():  # in the order the circuit lists them
        layers = range(int(config["n_layers"])) if "{layer}" in pattern else [0]
        want = [_model_eval(circuit, d, config, f"/tensor_shapes/{pattern}/{axis}", source)
                for axis, d in enumerate(dims)]
        for layer in layers:
            tname = pattern.replace("{layer}", str(layer))
            info = tensors.get(tname)
            if info is None:
                continue  # a missing tensor the circuit needs is refused by name when it is bound
            shape = [int(n) for n in info.shape]
            if len(shape) != len(dims):
                raise ModelError(f"tensor has {len(shape)} dimensions", path=source, pointer=tname, value=shape,
                                 expected=f"{len(dims)} ({', '.join(map(str, dims))})")
            for d, size, expect in zip(dims, shape, want, strict=True):
                if expect != size:
                    raise ModelError(f"contradicts the tensor shapes: {tname} has {d} = {size}", path=source,
                                     pointer=_keys_of(circuit, d) or tname, value=expect, expected=size)


@functools.lru_cache(maxsize=1)
def _gguf_keys() -> tuple[frozenset[str], frozenset[str]]:
    """(math, inert) key suffixes after "<arch>." from circuits/gguf_keys.json."""
    data = json.loads((Path(__file__).resolve().parent / "gguf_keys.json").read_text(encoding="utf-8"))
    return frozenset(data["math"]), frozenset(data["inert"])


def check_keys(circuit: Circuit, metadata: Mapping[str, Any], *, source: str = "<model>") -> None:
    """Refuse an "<arch>.*" metadata key the circuit neither reads nor ignores, unless it is known to be inert."""
    arch = circuit.architecture
    prefix = arch + "."
    read = {spec["key"].replace("{arch}", arch) for spec in circuit.data["config"].values() if "key" in spec}
    read |= {k.replace("{arch}", arch) for k in circuit.data.get("ignores", {})}
    math, inert = _gguf_keys()
    for key in sorted(metadata):
        if not key.startswith(prefix) or key in read:
            continue
        suffix = key[len(prefix):]
        if suffix in inert:
            continue
        what = ("metadata key changes the arithmetic and the circuit does not implement it" if suffix in math
                else "unknown metadata key (cannot tell whether it changes the arithmetic)")
        raise ModelError(what, path=source, pointer=key, value=metadata[key],
                         expected=f"keys circuits/{circuit.path.name} reads or ignores")


def _layer_envs(circuit: Circuit, config: dict[str, Any]) -> list[dict[str, Any]]:
    """The expression environment of every layer: the config, `layer` and the per-layer attributes."""
    where = str(circuit.path)
    exprs = {k: Expr(v, where=where, pointer=f"/layer_attrs/{k}") for k, v in circuit.data.get("layer_attrs", {}).items()}
    envs = []
    for layer in range(int(config["n_layers"])):
        env = {**config, "layer": layer}
        for k, expr in exprs.items():
            env[k] = expr(env)
        envs.append(env)
    return envs


def op_active(spec: dict[str, Any], layer: int, env: Mapping[str, Any], tensors: TensorTable, where: str,
              pointer: str) -> bool:
    """Whether an op of the circuit exists in this model and layer (its `when` and `if_tensor` conditions)."""
    if "if_tensor" in spec and spec["if_tensor"].replace("{layer}", str(layer)) not in tensors:
        return False
    return "when" not in spec or bool(evaluate(spec["when"], env, where=where, pointer=pointer + "/when"))


def _weight_names(wspec: Any, layer: int) -> list[str]:
    if isinstance(wspec, str):
        names = [wspec]
    elif "first_of" in wspec:
        names = list(wspec["first_of"])
    else:
        names = [wspec["tensor"]]
    return [n.replace("{layer}", str(layer)) for n in names]


def tensors_read(circuit: Circuit, config: dict[str, Any], tensors: TensorTable) -> set[str]:
    """Names of the model's tensors that the active ops of the circuit read (for the unused-tensor check)."""
    where = str(circuit.path)
    data = circuit.data
    blocks: list[tuple[str, int, Mapping[str, Any]]] = [("header", -1, config)]
    blocks += [("layer", i, env) for i, env in enumerate(_layer_envs(circuit, config))]
    blocks.append(("footer", -1, config))
    read: set[str] = set()
    for section, layer, env in blocks:
        for i, spec in enumerate(data[section]):
            if not op_active(spec, layer, env, tensors, where, f"/{section}/{i}"):
                continue
            for wspec in spec.get("weights", {}).values():
                read.update(next(([n] for n in _weight_names(wspec, layer) if n in tensors), []))
    return read


def weight_layout(dtype: str, ndim: int) -> str:
    if dtype in QUANTIZED:
        return "ggml_blocks"
    return "row_major" if ndim >= 2 else "contiguous"


class _Hydrator:
    def __init__(self, circuit: Circuit, config: dict[str, Any], tensors: TensorTable, interfaces: Interfaces,
                 phase: str, max_rows: int, kv_dtype: str, source: str) -> None:
        self.circuit = circuit
        self.where = str(circuit.path)
        self.config = config
        self.tensors_in = tensors
        self.interfaces = interfaces
        self.phase = phase
        self.max_rows = max_rows
        self.kv_dtype = kv_dtype
        self.source = source
        self.ops: list[OpNode] = []
        self.tensors: dict[str, Tensor] = {}
        self.state: dict[str, StateBuf] = {}
        self.scope: dict[str, str] = {}
        self.versions: dict[str, int] = {}
        self.weight_cnames: dict[str, str] = {}

    def _new_tensor(self, local: str, dtype: str, shape: tuple[int, ...], dynamic: bool, producer: str,
                    kind: str = "activation") -> str:
        n = self.versions.get(local, 0)
        self.versions[local] = n + 1
        name = c_ident(f"t_{local}_{n}")
        self.tensors[name] = Tensor(name, dtype, shape, dynamic, producer, kind)
        self.scope[local] = name
        return name

    def _weight(self, spec: Any, layer: int, pointer: str, env: Mapping[str, Any]) -> WeightRef:
        names = _weight_names(spec, layer)
        for tname in names:
            info = self.tensors_in.get(tname)
            if info is None:
                continue
            shape = tuple(int(d) for d in reversed(tuple(info.shape)))
            base = re.sub(r"[^A-Za-z0-9]+", "_", tname.removesuffix(".weight")).strip("_")
            rows = None
            if isinstance(spec, dict) and "rows" in spec:
                lo, hi = (int(evaluate(r, env, where=self.where, pointer=f"{pointer}/rows")) for r in spec["rows"])
                if not 0 <= lo < hi <= shape[0]:
                    raise ModelError(f"row slice [{lo}, {hi}) is outside the tensor", path=self.source,
                                     pointer=tname, value=list(shape), expected=f"rows within [0, {shape[0]})")
                rows, shape = (lo, hi), (hi - lo, *shape[1:])
                base += f"_r{lo}_{hi}"
            key = f"{tname}#{rows}"
            if key not in self.weight_cnames:
                self.weight_cnames[key] = c_ident("w_" + base)
            return WeightRef(self.weight_cnames[key], tname, info.type_name, shape, rows)
        raise ModelError(f"required tensor is missing (circuits/{self.circuit.path.name} {pointer} reads it)",
                         path=self.source, pointer=names[0])

    def build(self) -> Graph:
        data = self.circuit.data
        for name, spec in data["inputs"].items():
            shape = tuple(self.max_rows if d == "T" else int(evaluate(d, self.config)) for d in spec["shape"])
            self.tensors[c_ident(f"in_{name}")] = Tensor(f"in_{name}", spec["dtype"], shape,
                                                         self.phase != "decode", None, "input")
            self.scope[name] = f"in_{name}"
        for i, op in enumerate(data["header"]):
            self._op(op, -1, f"/header/{i}", {})
        for layer, env in enumerate(_layer_envs(self.circuit, self.config)):
            for sname, sspec in data.get("state", {}).items():
                if sspec.get("per_layer"):
                    self._state(sname, sspec, layer, env)
            for i, op in enumerate(data["layer"]):
                self._op(op, layer, f"/layer/{i}", env)
        for i, op in enumerate(data["footer"]):
            self._op(op, -1, f"/footer/{i}", {})
        outputs = {k: self.scope[v] for k, v in data["outputs"].items()}
        return Graph(self.phase, self.max_rows, self.ops, self.tensors, self.state, outputs, self.config)

    def _state(self, sname: str, spec: dict[str, Any], layer: int, env: dict[str, Any]) -> None:
        dtype = self.kv_dtype if spec["dtype"] == "policy:kv" else spec["dtype"]
        shape = tuple("C" if d == "C" else int(evaluate(d, env, where=self.where)) for d in spec["shape"])
        cname = c_ident(f"s_blk{layer}_{sname}")
        self.state[cname] = StateBuf(cname, dtype, shape)
        self.scope[f"state:{sname}"] = cname

    def _op(self, spec: dict[str, Any], layer: int, pointer: str, env: dict[str, Any]) -> None:
        env = env or dict(self.config)
        if not op_active(spec, layer, env, self.tensors_in, self.where, pointer):
            return
        iface_id, iface = self.interfaces.for_op(spec["op"], self.phase)
        ports = iface["ports"]
        label = f"blk.{layer}.{spec['id']}" if layer >= 0 else spec["id"]
        cname = c_ident(f"blk{layer}_{spec['id']}" if layer >= 0 else f"op_{spec['id']}")
        # "rows": "last": the op computes only the last row (the logits' row), where "rows_when" (an expression over
        # the layer's environment; absent: everywhere) holds; batch: every row is a sequence's last, so all rows
        rows_last = (spec.get("rows") == "last" and self.phase != "batch"
                     and ("rows_when" not in spec
                          or bool(evaluate(spec["rows_when"], env, where=self.where, pointer=pointer + "/rows_when"))))
        declared = set(spec.get("in", {})) | set(spec.get("out", {})) | set(spec.get("weights", {})) | set(
            spec.get("state", {}))
        if declared != set(ports):
            raise CircuitError(f"op ports do not match interface {iface_id}", path=self.where, pointer=pointer,
                               value=sorted(declared), expected=sorted(ports))
        dims: dict[str, int] = {}
        dynamic: dict[str, str] = {}
        for dname, dexpr in spec.get("dims", {}).items():
            dims[dname] = int(evaluate(dexpr, env, where=self.where, pointer=f"{pointer}/dims/{dname}"))
        bound: dict[str, tuple[tuple[int, ...], bool]] = {}
        inputs: dict[str, str] = {}
        for port, local in spec.get("in", {}).items():
            tname = self.scope.get(local)
            if tname is None:
                raise CircuitError(f"op reads '{local}' before anything writes it", path=self.where,
                                   pointer=f"{pointer}/in/{port}")
            t = self.tensors[tname]
            shape, dyn = t.shape, t.rows_dynamic
            if rows_last:
                shape, dyn = (1, *shape[1:]), False
            bound[port] = (shape, dyn)
            inputs[port] = tname
        weights: dict[str, WeightRef] = {}
        for port, wspec in spec.get("weights", {}).items():
            ref = self._weight(wspec, layer, f"{pointer}/weights/{port}", env)
            weights[port] = ref
            bound[port] = (ref.shape, False)
        state: dict[str, str] = {}
        for port, sname in spec.get("state", {}).items():
            cname_s = self.scope.get(f"state:{sname}")
            if cname_s is None:
                raise CircuitError(f"op uses unknown state '{sname}'", path=self.where, pointer=f"{pointer}/state/{port}")
            state[port] = cname_s
        # unify simple dim names first, then check composite shape expressions
        for port, (shape, dyn) in bound.items():
            want = ports[port]["shape"]
            if len(want) != len(shape):
                raise ModelError(f"{label}: port '{port}' has rank {len(shape)}", path=self.source,
                                 pointer=inputs.get(port) or weights[port].tensor, value=list(shape),
                                 expected=f"rank {len(want)} {want} ({iface_id})")
            for axis, (dname, size) in enumerate(zip(want, shape, strict=False)):
                if C_IDENT.match(dname) and dname not in dims:
                    dims[dname] = size
                    if dyn and axis == 0:
                        dynamic[dname] = "n_tokens"
        for sport, sname in state.items():
            for dname, size in zip(ports[sport]["shape"], self.state[sname].shape, strict=False):
                if C_IDENT.match(dname) and dname not in dims and isinstance(size, int):
                    dims[dname] = size
        if state:  # KV capacity: chosen at run time (--ctx), bounded by the trained context
            dims["C"] = int(self.config.get("ctx_train", 0)) or self.max_rows
            dynamic["C"] = "n_ctx"
        for port, (shape, _dyn) in bound.items():
            expect = tuple(int(evaluate(d, dims)) for d in ports[port]["shape"])
            if expect != tuple(shape):
                raise ModelError(f"{label}: impossible shape for port '{port}'", path=self.source,
                                 pointer=inputs.get(port) or weights[port].tensor, value=list(shape),
                                 expected=f"{list(expect)} from {iface_id} with dims {dims}")
        for sport, sname in state.items():
            sb = self.state[sname]
            expect = tuple("C" if d == "C" else int(evaluate(d, dims)) for d in ports[sport]["shape"])
            if expect != sb.shape:
                raise ModelError(f"{label}: state '{sport}' shape mismatch", value=list(sb.shape),
                                 expected=list(expect))
        params: dict[str, Any] = {}
        for pname, ptype in iface["params"].items():
            if pname not in spec.get("params", {}):
                raise CircuitError(f"op lacks param '{pname}' of {iface_id}", path=self.where, pointer=pointer)
            value = evaluate(spec["params"][pname], env, where=self.where, pointer=f"{pointer}/params/{pname}")
            params[pname] = float(value) if ptype == "float" else int(value)
        extra = set(spec.get("params", {})) - set(iface["params"])
        if extra:
            raise CircuitError(f"op has params its interface lacks: {sorted(extra)}", path=self.where, pointer=pointer)
        node = OpNode(label=label, cname=cname, op=spec["op"], layer=layer, interface=iface_id, inputs=inputs,
                      outputs={}, weights=weights, state=state, dims=dims, dynamic_dims=dynamic,
                      params=params, policy_keys=dict(spec.get("policy", {})), rows_last=rows_last)
        for port, local in spec.get("out", {}).items():
            shape = tuple(int(evaluate(d, dims)) for d in ports[port]["shape"])
            dyn = bool(shape) and ports[port]["shape"][0] in dynamic
            node.outputs[port] = self._new_tensor(local, ports[port].get("dtype", "f32"), shape, dyn, label)
        self.ops.append(node)


def hydrate(circuit: Circuit, config: dict[str, Any], tensors: TensorTable, interfaces: Interfaces, *,
            phase: str, max_rows: int, kv_dtype: str, source: str = "<model>") -> Graph:
    """Expand the circuit into the logical graph of `phase`: decode has one row, prefill up to max_rows
    consecutive positions of one sequence, batch up to max_rows rows that are each the next token of a
    different sequence (its own position and KV slot; ops marked rows=last run on every row, and the
    position-dependent ops take the batch phase's per-row interfaces)."""
    if phase not in ("prefill", "decode", "batch"):
        raise CircuitError("unknown phase", value=phase, expected=["prefill", "decode", "batch"])
    rows = 1 if phase == "decode" else max_rows
    return _Hydrator(circuit, config, tensors, interfaces, phase, rows, kv_dtype, source).build()
