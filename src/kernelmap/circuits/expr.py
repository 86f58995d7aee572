"""Circuit expressions: a small, safe arithmetic language for config rules and per-layer attributes.

Input: an expression string from a circuit file (e.g. ``"layer % swa_period < swa_period - 1"``) and
an environment of names. Output: an int, float or bool. The text is parsed with Python's own parser
and walked over a whitelist of node types (numbers, names, + - * / // %, comparisons, and/or/not,
``a if c else b``, and the functions sqrt, ceil, floor, min, max, f32 (round to float32, so a circuit
can state C's float arithmetic: ``f32(1 / f32(sqrt(head_dim)))``); nothing is ever `eval`ed.

Parsing goes through `parse_eval`, which holds a lock: CPython 3.11's parser is not safe to call from two
threads at once (its AST constructor keeps one recursion-depth counter per interpreter and raises
"SystemError: AST constructor recursion depth mismatch" when two parses interleave), and compile_model does run
in several threads (the family tests compile two models at a time; the server compiles off its event loop).
"""

from __future__ import annotations

import ast
import math
import struct
import threading
from collections.abc import Mapping
from typing import Any

from kernelmap.errors import CircuitError

__all__ = ["Expr", "EvaluationError", "evaluate", "parse_eval"]

_PARSE_LOCK = threading.Lock()


class EvaluationError(CircuitError):
    """A well-formed expression failed on its values (division by zero, overflow): the values' fault,
    which the caller may blame on the model file they came from."""


def parse_eval(text: str) -> ast.Expression:
    """ast.parse(text, mode="eval"), one thread at a time (see the module docstring)."""
    with _PARSE_LOCK:
        return ast.parse(text, mode="eval")

def _f32(x: float) -> float:
    """Round to the nearest float32 (C's (float) cast): f32(1 / f32(sqrt(d))) is C's 1.0f/sqrtf(d)."""
    return struct.unpack("<f", struct.pack("<f", float(x)))[0]


_FUNCS = {"sqrt": math.sqrt, "ceil": math.ceil, "floor": math.floor, "min": min, "max": max, "f32": _f32}
_BINOPS = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b,
    ast.FloorDiv: lambda a, b: a // b,
    ast.Mod: lambda a, b: a % b,
}
_CMPS = {
    ast.Lt: lambda a, b: a < b,
    ast.LtE: lambda a, b: a <= b,
    ast.Gt: lambda a, b: a > b,
    ast.GtE: lambda a, b: a >= b,
    ast.Eq: lambda a, b: a == b,
    ast.NotEq: lambda a, b: a != b,
}


class Expr:
    """A parsed, validated expression; `names` lists the free names it reads."""

    def __init__(self, text: str, *, where: str = "<expr>", pointer: str | None = None) -> None:
        if not isinstance(text, str) or len(text) > 500:
            raise CircuitError("expression must be a string of at most 500 characters",
                               path=where, pointer=pointer, value=text)
        self.text = text
        self.where = where
        self.pointer = pointer
        try:
            tree = parse_eval(text)
        except SyntaxError as exc:
            raise CircuitError(f"expression does not parse: {exc.msg}", path=where, pointer=pointer,
                               value=text) from None
        self.names: set[str] = set()
        self._check(tree.body)
        self._tree = tree.body

    def _fail(self, node: ast.AST) -> CircuitError:
        return CircuitError(f"expression uses a construct outside the grammar ({type(node).__name__})",
                            path=self.where, pointer=self.pointer, value=self.text,
                            expected="numbers, names, + - * / // %, comparisons, and/or/not, "
                                     "x if c else y, sqrt/ceil/floor/min/max/f32")

    def _check(self, node: ast.AST) -> None:
        if isinstance(node, ast.Constant):
            if isinstance(node.value, bool) or not isinstance(node.value, (int, float)):
                raise self._fail(node)
        elif isinstance(node, ast.Name):
            self.names.add(node.id)
        elif isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            self._check(node.left)
            self._check(node.right)
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd, ast.Not)):
            self._check(node.operand)
        elif isinstance(node, ast.Compare) and all(type(op) in _CMPS for op in node.ops):
            self._check(node.left)
            for comp in node.comparators:
                self._check(comp)
        elif isinstance(node, ast.BoolOp):
            for value in node.values:
                self._check(value)
        elif isinstance(node, ast.IfExp):
            self._check(node.test)
            self._check(node.body)
            self._check(node.orelse)
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCS
              and not node.keywords):
            for arg in node.args:
                self._check(arg)
        else:
            raise self._fail(node)

    def __call__(self, env: Mapping[str, Any]) -> Any:
        missing = sorted(n for n in self.names if n not in env)
        if missing:
            raise CircuitError(f"expression names unknown value '{missing[0]}'", path=self.where,
                               pointer=self.pointer, value=self.text, expected=sorted(env))
        try:
            return self._eval(self._tree, env)
        except (ZeroDivisionError, OverflowError, ValueError, TypeError) as exc:
            raise EvaluationError(f"expression cannot be evaluated: {exc}", path=self.where,
                               pointer=self.pointer, value=self.text) from None

    def _eval(self, node: ast.AST, env: Mapping[str, Any]) -> Any:
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            return env[node.id]
        if isinstance(node, ast.BinOp):
            return _BINOPS[type(node.op)](self._eval(node.left, env), self._eval(node.right, env))
        if isinstance(node, ast.UnaryOp):
            value = self._eval(node.operand, env)
            if isinstance(node.op, ast.Not):
                return not value
            return -value if isinstance(node.op, ast.USub) else +value
        if isinstance(node, ast.Compare):
            left = self._eval(node.left, env)
            for op, comp in zip(node.ops, node.comparators, strict=False):
                right = self._eval(comp, env)
                if not _CMPS[type(op)](left, right):
                    return False
                left = right
            return True
        if isinstance(node, ast.BoolOp):
            values = (self._eval(v, env) for v in node.values)
            return all(values) if isinstance(node.op, ast.And) else any(values)
        if isinstance(node, ast.IfExp):
            return self._eval(node.body if self._eval(node.test, env) else node.orelse, env)
        assert isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
        return _FUNCS[node.func.id](*(self._eval(a, env) for a in node.args))


def evaluate(text: str | int | float, env: Mapping[str, Any], *, where: str = "<expr>",
             pointer: str | None = None) -> Any:
    """Evaluate a number (returned as is) or an expression string against `env`."""
    if isinstance(text, bool):
        return text
    if isinstance(text, (int, float)):
        return text
    return Expr(text, where=where, pointer=pointer)(env)
