"""Map stage helper: the small expression grammar of constraints and scratch sizes (text -> AST -> integer).

Grammar: integers, dim names, `+ - * /`, unary minus, parentheses and `ceil(...)`. Division is exact
(rational); `ceil` rounds up; a final value must be an integer. Parsing is a hand-written recursive
descent; nothing is ever handed to Python's `eval`. It does not know which dims exist (the loader checks).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from fractions import Fraction

__all__ = ["Expr", "ExprSyntaxError", "ExprValueError", "parse_expr"]

_TOKEN = re.compile(r"\s*(?:(\d+)|([A-Za-z_][A-Za-z0-9_]*)|(.))")
_MAX_LEN = 256


class ExprSyntaxError(ValueError):
    """The text is not an expression of the grammar (position and reason in the message)."""


class ExprValueError(ValueError):
    """Evaluation failed: unbound dim, division by zero, or a non-integer result."""


@dataclass(frozen=True)
class Num:
    value: int


@dataclass(frozen=True)
class Name:
    name: str


@dataclass(frozen=True)
class Neg:
    arg: Node


@dataclass(frozen=True)
class BinOp:
    op: str
    left: Node
    right: Node


@dataclass(frozen=True)
class Ceil:
    arg: Node


Node = Num | Name | Neg | BinOp | Ceil


def _tokens(text: str) -> list[tuple[str, str, int]]:
    out: list[tuple[str, str, int]] = []
    pos = 0
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:  # only trailing whitespace is left
            break
        start = m.start(m.lastindex or 0)
        if m.group(1) is not None:
            out.append(("num", m.group(1), start))
        elif m.group(2) is not None:
            out.append(("name", m.group(2), start))
        else:
            ch = m.group(3)
            if ch not in "+-*/()":
                raise ExprSyntaxError(f"unexpected character {ch!r} at column {start + 1}")
            out.append((ch, ch, start))
        pos = m.end()
    out.append(("end", "", len(text)))
    return out


class _Parser:
    def __init__(self, text: str) -> None:
        self.toks = _tokens(text)
        self.i = 0

    def peek(self) -> tuple[str, str, int]:
        return self.toks[self.i]

    def take(self, kind: str) -> tuple[str, str, int]:
        tok = self.toks[self.i]
        if tok[0] != kind:
            what = "end of text" if tok[0] == "end" else repr(tok[1])
            if kind == "end":
                raise ExprSyntaxError(f"unexpected {what} at column {tok[2] + 1}")
            raise ExprSyntaxError(f"expected {kind!r} at column {tok[2] + 1}, found {what}")
        self.i += 1
        return tok

    def expr(self) -> Node:
        node = self.term()
        while self.peek()[0] in ("+", "-"):
            op = self.take(self.peek()[0])[0]
            node = BinOp(op, node, self.term())
        return node

    def term(self) -> Node:
        node = self.unary()
        while self.peek()[0] in ("*", "/"):
            op = self.take(self.peek()[0])[0]
            node = BinOp(op, node, self.unary())
        return node

    def unary(self) -> Node:
        if self.peek()[0] == "-":
            self.take("-")
            return Neg(self.unary())
        return self.atom()

    def atom(self) -> Node:
        kind, text, col = self.peek()
        if kind == "num":
            self.take("num")
            return Num(int(text))
        if kind == "name":
            self.take("name")
            if text == "ceil":
                self.take("(")
                inner = self.expr()
                self.take(")")
                return Ceil(inner)
            return Name(text)
        if kind == "(":
            self.take("(")
            inner = self.expr()
            self.take(")")
            return inner
        what = "end of text" if kind == "end" else repr(text)
        raise ExprSyntaxError(f"expected a number, a name, ceil( or ( at column {col + 1}, found {what}")


def _names(node: Node, acc: set[str]) -> None:
    if isinstance(node, Name):
        acc.add(node.name)
    elif isinstance(node, (Neg, Ceil)):
        _names(node.arg, acc)
    elif isinstance(node, BinOp):
        _names(node.left, acc)
        _names(node.right, acc)


def _eval(node: Node, dims: dict[str, int]) -> Fraction:
    if isinstance(node, Num):
        return Fraction(node.value)
    if isinstance(node, Name):
        if node.name not in dims:
            raise ExprValueError(f"dim {node.name} is not bound")
        return Fraction(dims[node.name])
    if isinstance(node, Neg):
        return -_eval(node.arg, dims)
    if isinstance(node, Ceil):
        return Fraction(math.ceil(_eval(node.arg, dims)))
    left = _eval(node.left, dims)
    right = _eval(node.right, dims)
    if node.op == "+":
        return left + right
    if node.op == "-":
        return left - right
    if node.op == "*":
        return left * right
    if right == 0:
        raise ExprValueError("division by zero")
    return left / right


@dataclass(frozen=True)
class Expr:
    """A parsed expression: its source text, AST and the dim names it reads."""

    text: str
    tree: Node
    names: frozenset[str]

    def evaluate(self, dims: dict[str, int]) -> int:
        """Value over concrete dims; raises ExprValueError if unbound, divided by zero or not integral."""
        value = _eval(self.tree, dims)
        if value.denominator != 1:
            raise ExprValueError(f"{self.text} is not an integer ({value}); use ceil(...)")
        return int(value)


def parse_expr(text: str | int) -> Expr:
    """Parse an expression (an int is accepted as its own literal); raises ExprSyntaxError."""
    if isinstance(text, bool):
        raise ExprSyntaxError("a boolean is not an expression")
    if isinstance(text, int):
        return Expr(str(text), Num(text) if text >= 0 else Neg(Num(-text)), frozenset())
    if not isinstance(text, str):
        raise ExprSyntaxError(f"an expression must be a string or an integer, not {type(text).__name__}")
    if len(text) > _MAX_LEN:
        raise ExprSyntaxError(f"expression longer than {_MAX_LEN} characters")
    if not text.strip():
        raise ExprSyntaxError("empty expression")
    parser = _Parser(text)
    tree = parser.expr()
    parser.take("end")
    acc: set[str] = set()
    _names(tree, acc)
    return Expr(text, tree, frozenset(acc))
