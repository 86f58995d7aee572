"""Circuit files: load and validate the per-architecture circuit and the operation interfaces.

Input: `circuits/*.json` (one per architecture, chosen by the GGUF's `general.architecture`) and
`circuits/interfaces.json`. Output: validated dicts plus their content hashes. Architecture knowledge
lives only in these files; this module applies a schema and never branches on an architecture name.
"""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema

from kernelmap.errors import CircuitError, closest

__all__ = ["Circuit", "CIRCUIT_DIR", "Interfaces", "load_circuit", "load_interfaces", "circuit_for"]

CIRCUIT_DIR = Path(__file__).resolve().parent
_NOT_CIRCUITS = ("interfaces.json", "gguf_keys.json")  # data files beside the circuits

_NAME = {"type": "string", "pattern": "^[a-z][a-z0-9_]*$"}
_VALUE = {"type": ["string", "number"]}
_TENSOR = {"type": "string", "pattern": "^[A-Za-z0-9_.{}]+$"}
_OP = {
    "type": "object",
    "additionalProperties": False,
    "required": ["id", "op"],
    # rows_when narrows "rows": "last" to the layers where it holds: meaningless without it
    "dependentSchemas": {"rows_when": {"required": ["rows"], "properties": {"rows": {"const": "last"}}}},
    "properties": {
        "id": _NAME,
        "op": _NAME,
        "when": {"type": "string"},
        "if_tensor": _TENSOR,
        "policy": {"type": "object", "additionalProperties": {"type": "string"}},
        "rows": {"enum": ["all", "last"]},
        "rows_when": {"type": "string"},
        "in": {"type": "object", "additionalProperties": _NAME},
        "out": {"type": "object", "additionalProperties": _NAME},
        "state": {"type": "object", "additionalProperties": _NAME},
        "weights": {"type": "object", "additionalProperties": {
            "oneOf": [
                _TENSOR,
                {"type": "object", "additionalProperties": False, "required": ["first_of"],
                 "properties": {"first_of": {"type": "array", "minItems": 1, "items": _TENSOR}}},
                {"type": "object", "additionalProperties": False, "required": ["tensor", "rows"],
                 "properties": {"tensor": _TENSOR,
                                "rows": {"type": "array", "minItems": 2, "maxItems": 2, "items": _VALUE}}},
            ]}},
        "dims": {"type": "object", "additionalProperties": _VALUE},
        "params": {"type": "object", "additionalProperties": _VALUE},
    },
}
CIRCUIT_SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "additionalProperties": False,
    "required": ["schema", "architecture", "config", "inputs", "header", "layer", "footer", "outputs"],
    "properties": {
        "schema": {"const": "kernelmap.circuit/1"},
        "architecture": {"type": "string", "pattern": "^[a-z0-9_]+$"},
        "description": {"type": "string"},
        "config": {"type": "object", "additionalProperties": {
            "type": "object", "additionalProperties": False,
            "properties": {
                "key": {"type": "string"},
                # "length": the element count of an array key (e.g. the tokenizer's token list)
                "type": {"enum": ["int", "float", "bool", "str", "length"]},
                "default": _VALUE,
                "value": {"type": ["number", "string", "boolean"]},
                "expr": {"type": "string"},
                "tensor_dim": {"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}],
                               "minItems": 2, "maxItems": 2},
                "tensor_exists": _TENSOR,
                "allowed": {"type": "array", "minItems": 1, "items": {"type": ["string", "number", "boolean"]}},
                "values": {"type": "object", "minProperties": 1, "additionalProperties": {"type": "number"}},
                # bounds on a value read from the file: min inclusive, above exclusive
                "min": {"type": "number"},
                "above": {"type": "number"},
            }}},
        "ignores": {"type": "object", "propertyNames": {"pattern": "^[a-z0-9_.{}]+$"},
                    "additionalProperties": {"type": "string", "minLength": 1}},
        "checks": {"type": "array", "items": {
            "type": "object", "additionalProperties": False, "required": ["expr", "message"],
            "properties": {"expr": {"type": "string"}, "message": {"type": "string"}}}},
        # tensor -> its shape in GGUF order (ne0 first) as expressions over the config: each tensor the file
        # has must match ({layer}: every layer), so a config key that contradicts the tensors is refused
        "tensor_shapes": {"type": "object", "propertyNames": _TENSOR,
                          "additionalProperties": {"type": "array", "minItems": 1, "maxItems": 4, "items": _VALUE}},
        "layer_attrs": {"type": "object", "additionalProperties": {"type": "string"}},
        "inputs": {"type": "object", "additionalProperties": {
            "type": "object", "required": ["dtype", "shape"],
            "properties": {"dtype": {"type": "string"}, "shape": {"type": "array"}}}},
        "state": {"type": "object", "additionalProperties": {
            "type": "object", "required": ["shape", "dtype"], "additionalProperties": False,
            "properties": {"per_layer": {"type": "boolean"}, "shape": {"type": "array"},
                           "dtype": {"type": "string"}}}},
        "header": {"type": "array", "items": _OP},
        "layer": {"type": "array", "items": _OP},
        "footer": {"type": "array", "items": _OP},
        "outputs": {"type": "object", "additionalProperties": _NAME},
    },
}


@dataclass(frozen=True)
class Circuit:
    """A validated circuit file."""

    path: Path
    data: dict[str, Any]
    sha256: str

    @property
    def architecture(self) -> str:
        return self.data["architecture"]


@dataclass(frozen=True)
class Interfaces:
    """The validated operation interfaces, by id and by op."""

    path: Path
    by_id: dict[str, dict[str, Any]]
    sha256: str

    def for_op(self, op: str, phase: str | None = None) -> tuple[str, dict[str, Any]]:
        """The single interface that implements `op` in `phase`: the one whose `phases` lists the phase,
        else the one without `phases` (an interface with `phases` serves only those)."""
        found = [(iid, spec) for iid, spec in sorted(self.by_id.items()) if spec["op"] == op]
        own = [(iid, spec) for iid, spec in found if phase is not None and phase in spec.get("phases", ())]
        found = own or [(iid, spec) for iid, spec in found if "phases" not in spec]
        if len(found) != 1:
            ops = sorted({spec["op"] for spec in self.by_id.values()})
            raise CircuitError(f"no single interface for op '{op}'" + (f" in phase {phase}" if phase else ""),
                               path=self.path, value=op, expected=ops, hint=f"closest: {closest(op, ops)}")
        return found[0]


def _read_json(path: Path) -> tuple[Any, str]:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise CircuitError(f"cannot read file: {exc.strerror}", path=path) from None
    try:
        return json.loads(raw), hashlib.sha256(raw).hexdigest()
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CircuitError(f"not valid JSON: {exc}", path=path) from None


def load_circuit(path: Path) -> Circuit:
    """Load and schema-check one circuit file."""
    data, digest = _read_json(path)
    errors = sorted(jsonschema.Draft202012Validator(CIRCUIT_SCHEMA).iter_errors(data),
                    key=lambda e: list(map(str, e.absolute_path)))
    if errors:
        err = errors[0]
        pointer = "/" + "/".join(str(p) for p in err.absolute_path)
        raise CircuitError(err.message, path=path, pointer=pointer)
    seen: set[str] = set()
    for section in ("header", "layer", "footer"):
        for i, op in enumerate(data[section]):
            if op["id"] in seen:
                raise CircuitError("duplicate op id", path=path, pointer=f"/{section}/{i}/id", value=op["id"])
            seen.add(op["id"])
    return Circuit(path=path, data=data, sha256=digest)


@functools.lru_cache(maxsize=4)
def load_interfaces(path: Path = CIRCUIT_DIR / "interfaces.json") -> Interfaces:
    """Load the operation interfaces file."""
    data, digest = _read_json(path)
    if not isinstance(data, dict) or data.get("schema") != "kernelmap.interfaces/1":
        raise CircuitError("not an interfaces file", path=path, pointer="/schema",
                           value=data.get("schema") if isinstance(data, dict) else data,
                           expected="kernelmap.interfaces/1")
    return Interfaces(path=path, by_id=dict(data["interfaces"]), sha256=digest)


def circuit_for(architecture: str, search: tuple[Path, ...] = ()) -> Circuit:
    """Find the circuit whose `architecture` field equals the model's; fail closed if none or several."""
    dirs = (*search, CIRCUIT_DIR)
    found: list[Circuit] = []
    known: list[str] = []
    for d in dirs:
        for path in sorted(Path(d).glob("*.json")):
            if path.name in _NOT_CIRCUITS:
                continue
            circuit = load_circuit(path)
            known.append(circuit.architecture)
            if circuit.architecture == architecture:
                found.append(circuit)
    if not found:
        raise CircuitError("no circuit file for this architecture", pointer="general.architecture",
                           value=architecture, expected=sorted(set(known)))
    if len(found) > 1:
        raise CircuitError(f"two circuit files claim this architecture: {found[0].path} and {found[1].path}",
                           value=architecture)
    return found[0]
