"""LKB stage, data contracts: the JSON Schemas every LKB file is checked against after loading.

Input: nothing. Output: schema dicts (draft 2020-12) for HARDWARE, KERNEL_FAMILIES, FUSIONS, DEVICES,
measurements, profiles and campaign ledgers. Semantic checks (chains, overrides, providers) live in
registry.py and coverage.py.
"""

from __future__ import annotations

from typing import Any

__all__ = ["CAMPAIGN", "COMPUTE_UNITS", "DEVICES", "FAMILIES", "FUSIONS", "HARDWARE", "HOW", "KINDS",
           "MEASUREMENTS", "PROFILE"]

_ID = {"type": "string", "pattern": "^[a-z0-9_]+$"}
_DOTTED = {"type": "string", "pattern": "^[a-z0-9_]+(\\.[a-z0-9_]+)*$"}
_STRS = {"type": "array", "items": {"type": "string", "minLength": 1}, "uniqueItems": True}
_SCALAR = {"type": ["string", "integer", "number", "boolean"]}

KINDS = ("runtime", "compile", "policy", "numerics")
HOW = ("instantiation", "copy", "branch")
COMPUTE_UNITS = ("scalar_fma", "avx2_fma", "avx512_fma", "avx512_vnni_dot", "avx_vnni_dot", "amx_tile",
                 "neon_fma", "neon_dot", "sve_fma", "memory")

HARDWARE: dict[str, Any] = {
    "type": "object", "additionalProperties": False, "required": ["class"],
    "properties": {
        "class": {"type": "object", "additionalProperties": False,
                  "required": ["name", "arch", "vector_bits", "features"],
                  "properties": {"name": _ID, "parent": _ID, "arch": {"enum": ["any", "x86_64", "aarch64"]},
                                 "vector_bits": {"type": "integer", "minimum": 0},
                                 "features": _STRS, "desc": {"type": "string"}}},
        "defaults": {"type": "object", "additionalProperties": _SCALAR},
    },
}

_PARAM = {"type": "object", "additionalProperties": False, "required": ["name", "kind"],
          "properties": {"name": {"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]*$"}, "kind": {"enum": list(KINDS)},
                         "values": {"type": "array", "items": _SCALAR, "minItems": 1},
                         "desc": {"type": "string"}}}

_POINT = {"type": "object", "additionalProperties": False, "required": ["id"],
          "properties": {
              "id": _DOTTED, "how": {"enum": list(HOW)}, "classes": _STRS,
              "providers": {"type": "array", "minItems": 1, "items": {
                  "type": "object", "additionalProperties": False, "required": ["provider", "variants"],
                  "properties": {"provider": _ID, "variants": {**_STRS, "minItems": 1}}}},
              "params": {"type": "object", "additionalProperties": _SCALAR},
              "reason": {"type": "string", "minLength": 1}, "evidence": {"type": "string", "minLength": 1}}}

FAMILIES: dict[str, Any] = {
    "type": "object", "additionalProperties": False,
    "properties": {"family": {"type": "array", "items": {
        "type": "object", "additionalProperties": False, "required": ["id"],
        "properties": {
            "id": _DOTTED, "ops": {**_STRS, "minItems": 1}, "formats": {**_STRS, "minItems": 1},
            "rows_per_call": {"oneOf": [{"type": "integer", "minimum": 1}, {"const": "M"}]},
            "compute": {"enum": list(COMPUTE_UNITS)}, "desc": {"type": "string"},
            "pipeline": {"type": "object", "minProperties": 1, "additionalProperties": {"type": "string"}},
            "param": {"type": "array", "items": _PARAM}, "point": {"type": "array", "items": _POINT}}}}},
}

FUSIONS: dict[str, Any] = {
    "type": "object", "additionalProperties": False,
    "properties": {"rule": {"type": "array", "items": {
        "type": "object", "additionalProperties": False, "required": ["id", "op", "family", "rows"],
        "properties": {"id": _DOTTED, "op": _ID, "family": _DOTTED,
                       "rows": {"type": "array", "items": {"type": "integer", "minimum": 1}, "minItems": 1},
                       "points": _STRS}}}},
}

DEVICES: dict[str, Any] = {
    "type": "object", "additionalProperties": False,
    "properties": {"device": {"type": "array", "items": {
        "type": "object", "additionalProperties": False, "required": ["id", "model_name", "class", "cores"],
        "properties": {"id": _ID, "model_name": {"type": "string"}, "class": _ID,
                       "cores": {"type": "integer", "minimum": 1},
                       "threads_per_core": {"type": "integer", "minimum": 1},
                       "l1d_kib": {"type": "integer"}, "l2_kib": {"type": "integer"},
                       "l3_mib": {"type": "integer"}, "bandwidth_gbps": {"type": "number"},
                       "notes": {"type": "string"}}}}},
}

MEASUREMENTS: dict[str, Any] = {
    "type": "object",
    "properties": {"measurement": {"type": "array", "items": {
        "type": "object",
        "required": ["class", "provider", "variant", "rows", "threads", "shape", "metric", "value", "machine",
                     "date"],
        "properties": {"class": _ID, "provider": _ID, "variant": _ID,
                       "rows": {"type": "integer", "minimum": 0}, "threads": {"type": "integer", "minimum": 1},
                       "shape": {"type": "string"},
                       "metric": {"type": "string", "pattern": "^(gbps|gops|ns|median_us)(_[a-z0-9]+)?$"},
                       "value": {"type": "number"}, "machine": {"type": "string"},
                       "date": {"type": ["string"]}}}}},
}

PROFILE: dict[str, Any] = {
    "type": "object", "additionalProperties": False, "required": ["schema", "rows"],
    "properties": {
        "schema": {"const": "kernelmap.lkb_profile/1"}, "model": {"type": "string"}, "class": _ID,
        "rows": {"type": "object", "minProperties": 1, "propertyNames": {"pattern": "^[1-9][0-9]*$"},
                 "additionalProperties": {"type": "array", "items": {
                     "type": "object", "additionalProperties": False,
                     "required": ["op", "provider", "variant", "seconds"],
                     "properties": {"op": {"type": "string"}, "provider": {"type": "string"},
                                    "variant": {"type": "string"},
                                    "seconds": {"type": "number", "minimum": 0}}}}}},
}

_METRICS = {"type": "object", "additionalProperties": {"anyOf": [_SCALAR, {"type": "array", "items": {"type": "string"}}]}}
CAMPAIGN: dict[str, Any] = {
    "type": "object", "additionalProperties": False, "required": ["campaign", "start"],
    "properties": {
        "campaign": {"type": "object", "required": ["name", "class", "started"],
                     "properties": {"name": _ID, "class": _ID, "model": {"type": "string"},
                                    "started": {"type": "string"}, "exited": {"type": "string"}}},
        "start": _METRICS, "exit": _METRICS},
}
