"""Bench stage: turn (kernel map, shape case, rows) into concrete dims, filled buffers and argument slots.

Input: a map's raw JSON dict, one case of bench/shapes.json and a row count. Output: a `Workload`
(dims, NumPy buffers per port, bytes moved, operations) or a skip reason when a map constraint or the
case excludes it. It does not time anything and never checks what a kernel computes.
"""

from __future__ import annotations

import ast
import json
import math
from dataclasses import dataclass, field
from fractions import Fraction
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from kernelmap.circuits.expr import parse_eval
from kernelmap.errors import RequestError
from kernelmap.weights.repack import REPACKED, repack

__all__ = ["SHAPES_PATH", "Workload", "bench_cases", "constraint_failure", "make_workload", "weight_data"]

SHAPES_PATH = Path(__file__).resolve().parent / "shapes.json"

# Bytes per element (exact fractions for GGML block formats) and (block elements, block bytes, scale fields).
_ELEMENT = {"f32": (1, 4), "f16": (1, 2), "bf16": (1, 2), "i32": (1, 4), "i8": (1, 1)}
_BLOCKS: dict[str, tuple[int, int, tuple[tuple[int, str], ...]]] = {
    "q8_0": (32, 34, ((0, "f16"),)),
    "q8_1": (32, 36, ((0, "f16"), (2, "f16"))),  # d, s (= d * sum of the quants; random here: any bits are valid)
    "q4_0": (32, 18, ((0, "f16"),)),
    "iq4_nl": (32, 18, ((0, "f16"),)),
    "q4_1": (32, 20, ((0, "f16"), (2, "f16"))),
    "q5_0": (32, 22, ((0, "f16"),)),
    "q5_1": (32, 24, ((0, "f16"), (2, "f16"))),
    "q2_k": (256, 84, ((80, "f16"), (82, "f16"))),
    "q3_k": (256, 110, ((108, "f16"),)),
    "q4_k": (256, 144, ((0, "f16"), (2, "f16"))),
    "q5_k": (256, 176, ((0, "f16"), (2, "f16"))),
    "q6_k": (256, 210, ((208, "f16"),)),
    "q8_k": (256, 292, ((0, "f32"),)),
}
_PORT_LISTS = ("inputs", "weights", "outputs", "state")


def elsize(dtype: str) -> Fraction:
    """Bytes per element of a dtype (a fraction for block formats)."""
    if dtype in _ELEMENT:
        n, b = _ELEMENT[dtype]
        return Fraction(b, n)
    if dtype in _BLOCKS:
        n, b, _ = _BLOCKS[dtype]
        return Fraction(b, n)
    raise RequestError(f"unknown dtype {dtype!r} for a bench buffer", value=dtype,
                       expected=sorted([*_ELEMENT, *_BLOCKS]))


def evaluate(text: str | int | float, names: dict[str, Any]) -> Fraction:
    """Evaluate an integer/dim expression (+ - * / parentheses, ceil()) with exact fractions."""
    if isinstance(text, (int, float)):
        return Fraction(text)
    tree = parse_eval(str(text))

    def walk(node: ast.AST) -> Fraction:
        if isinstance(node, ast.Expression):
            return walk(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return Fraction(node.value)
        if isinstance(node, ast.Name):
            if node.id not in names:
                raise KeyError(node.id)
            return Fraction(names[node.id])
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -walk(node.operand)
        if isinstance(node, ast.BinOp):
            a, b = walk(node.left), walk(node.right)
            if isinstance(node.op, ast.Add):
                return a + b
            if isinstance(node.op, ast.Sub):
                return a - b
            if isinstance(node.op, ast.Mult):
                return a * b
            if isinstance(node.op, ast.Div):
                return a / b
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "ceil"
                and len(node.args) == 1 and not node.keywords):
            return Fraction(math.ceil(walk(node.args[0])))
        raise ValueError(f"unsupported expression element {ast.dump(node)[:40]}")

    return walk(tree)


@cache
def _shapes() -> dict[str, Any]:
    with open(SHAPES_PATH, encoding="utf-8") as fh:
        return json.load(fh)


def bench_cases(interface: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(interface entry, its cases) from shapes.json; ({}, []) for an interface with no shapes."""
    entry = _shapes()["interfaces"].get(interface, {})
    return entry, list(entry.get("cases", []))


def ports(raw: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every declared port of a map by name (inputs, weights, outputs, state)."""
    out: dict[str, dict[str, Any]] = {}
    for key in _PORT_LISTS:
        for port in raw.get(key, []) or []:
            out[port["name"]] = port
    return out


def constraint_failure(rules: dict[str, Any], dims: dict[str, int]) -> str | None:
    for dim, rule in sorted(rules.items()):
        if dim not in dims:
            continue
        value = dims[dim]
        for kind, arg in sorted(rule.items()):
            bound = evaluate(arg, dims)
            ok = {"multiple": lambda v, b: b != 0 and v % b == 0, "min": lambda v, b: v >= b,
                  "max": lambda v, b: v <= b, "equals": lambda v, b: v == b}.get(kind)
            if ok is None or not ok(value, bound):
                return f"constraint_failed:{dim}:{kind} {arg}"
    return None


@dataclass
class Workload:
    """One benchmark point: concrete dims and runtime values, buffers by port name, bytes and operations."""

    dims: dict[str, int]
    runtime: dict[str, int]
    params: dict[str, float]
    buffers: dict[str, np.ndarray]
    bytes_moved: float
    flops: float | None
    keep: list[Any] = field(default_factory=list)


def _random_blocks(dtype: str, nbytes: int, rng: np.random.Generator) -> np.ndarray:
    """Random bytes forming valid GGML blocks: every scale a finite value in [1e-3, 1e-2]."""
    n, size, scales = _BLOCKS[dtype]
    data = rng.integers(0, 256, size=nbytes, dtype=np.uint8)
    blocks = data.reshape(-1, size)
    for offset, kind in scales:
        count = blocks.shape[0]
        vals = rng.uniform(1e-3, 1e-2, size=count)
        raw = vals.astype(np.float16 if kind == "f16" else np.float32).view(np.uint8).reshape(count, -1)
        blocks[:, offset:offset + raw.shape[1]] = raw
    return data


def fill(dtype: str, count: int, rng: np.random.Generator, spec: dict[str, Any] | None = None,
         names: dict[str, Any] | None = None) -> np.ndarray:
    """A 64-byte-aligned buffer of `count` elements of `dtype` holding valid random data."""
    nbytes = int(elsize(dtype) * count)
    if spec and "randint" in spec:
        high = int(evaluate(spec["randint"], names or {}))
        arr = rng.integers(0, max(high, 1), size=count, dtype=np.int32)
    elif dtype in _BLOCKS:
        arr = _random_blocks(dtype, nbytes, rng)
    elif dtype == "f32":
        arr = rng.standard_normal(count, dtype=np.float32)
    elif dtype in ("f16", "bf16"):
        arr = rng.standard_normal(count).astype(np.float16)
    elif dtype == "i32":
        arr = np.zeros(count, dtype=np.int32)
    else:
        arr = np.zeros(nbytes, dtype=np.uint8)
    raw = np.empty(nbytes + 64, dtype=np.uint8)
    start = (-raw.ctypes.data) % 64
    out = raw[start:start + nbytes]
    out[:] = arr.view(np.uint8).reshape(-1)[:nbytes]
    return out


def weight_data(raw: dict[str, Any], dims: dict[str, int], seed: int = 0) -> dict[str, np.ndarray]:
    """Random weight buffers for a map's weight ports at these dims (reused across rows and threads)."""
    rng = np.random.default_rng(seed)
    out = {}
    for port in raw.get("weights", []) or []:
        shape = [int(evaluate(d, dims)) for d in port["shape"]]
        data = fill(port["dtype"], int(math.prod(shape)), rng)
        if port.get("layout") in REPACKED:  # the bytes the packer would write for such a tensor
            packed = repack(port["layout"], port["dtype"], data, tuple(reversed(shape)))
            raw_buf = np.empty(packed.size + 64, dtype=np.uint8)
            start = (-raw_buf.ctypes.data) % 64
            data = raw_buf[start:start + packed.size]
            data[:] = packed
        out[port["name"]] = data
    return out


def make_workload(raw: dict[str, Any], entry: dict[str, Any], case: dict[str, Any], rows: int,
                  weights: dict[str, np.ndarray] | None = None, seed: int = 1) -> Workload | str:
    """Build the workload of one case at `rows` rows, or return the reason it does not apply."""
    allowed = case.get("weight_dtypes")
    wdtype = raw.get("quant", {}).get("weight", "none")
    if allowed is not None and wdtype not in allowed:
        return f"case_excludes_weight:{wdtype}"
    dims = {"M": rows, **{k: int(v) for k, v in case.get("dims", {}).items()}}
    for name in raw.get("dims", []):
        if name not in dims:
            return f"no_bench_value_for_dim:{name}"
    failure = constraint_failure(raw.get("constraints", {}) or {}, dims)
    if failure:
        return failure
    runtime = {"pos": 0, "n_tokens": rows, **{k: int(evaluate(v, dims))
                                              for k, v in entry.get("runtime", {}).items()}}
    if "C" in dims:
        runtime.setdefault("n_ctx", dims["C"])
        runtime.setdefault("kv_cells", dims["C"])  # a full-length cache: cells = capacity
    if runtime["pos"] < 0:
        return f"rows_exceed_context:{rows}"
    params = {**entry.get("params", {}), **case.get("params", {})}
    rng = np.random.default_rng(seed)
    weights = weights if weights is not None else weight_data(raw, dims)
    buffers: dict[str, np.ndarray] = {}
    names: dict[str, Any] = dict(dims)
    total = Fraction(0)
    for name, port in ports(raw).items():
        count = int(math.prod(int(evaluate(d, dims)) for d in port["shape"]))
        if name in weights:
            buffers[name] = weights[name]
        elif port.get("access") == "write":
            buffers[name] = fill("i8", int(elsize(port["dtype"]) * count), rng)
        else:
            buffers[name] = fill(port["dtype"], count, rng, entry.get("fill", {}).get(name), dims)
        size = elsize(port["dtype"]) * count
        names[f"{name}_bytes"] = size
        names[f"{name}_elsize"] = elsize(port["dtype"])
        total += size
    for item in raw.get("scratch", []) or []:
        nbytes = int(evaluate(item.get("bytes", item.get("size", 0)), dims))
        buffers[item["name"]] = fill("i8", max(nbytes, 1), rng)
    bytes_moved = float(evaluate(entry["bytes"], names)) if "bytes" in entry else float(total)
    flops = float(evaluate(entry["flops"], names)) if "flops" in entry else None
    return Workload(dims=dims, runtime=runtime, params=params, buffers=buffers,
                    bytes_moved=bytes_moved, flops=flops)
