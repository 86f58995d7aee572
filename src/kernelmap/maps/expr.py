"""Map stage helper: the small expression grammar of constraints and scratch sizes (text -> AST -> integer).

Grammar: integers, dim names, `+ - * /`, unary minus, parentheses and `ceil(...)`. Division is exact
(rational); `ceil` rounds up; a final value must be an integer. Parsing is a hand-written recursive
descent; nothing is ever handed to Python's `eval`. It does not know which dims exist (the loader checks).

A dim is bound either to one integer or, when it varies at run time (rows of a prefill chunk, the KV
capacity), to an inclusive range `(lo, hi)`. `Expr.span` gives the exact least and greatest value over
every value such dims take (by enumeration, capped at MAX_COMBINATIONS; past it the expression is
unevaluable, never guessed).
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from fractions import Fraction

__all__ = ["MAX_COMBINATIONS", "Bound", "Expr", "ExprSyntaxError", "ExprValueError", "assignments", "parse_expr",
           "show_bound"]

# A dim's binding: one value, or the inclusive range of values it takes at run time.
Bound = int | tuple[int, int]
# Most assignments of run-time-varying dims an evaluation may enumerate before it gives up (fail closed).
MAX_COMBINATIONS = 1 << 16

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


def _eval(node: Node, dims: Mapping[str, Bound]) -> Fraction:
    if isinstance(node, Num):
        return Fraction(node.value)
    if isinstance(node, Name):
        value = dims.get(node.name)
        if value is None:
            raise ExprValueError(f"dim {node.name} is not bound")
        if not isinstance(value, int):
            raise ExprValueError(f"dim {node.name} is a range ({show_bound(value)}), not one value")
        return Fraction(value)
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

    def evaluate(self, dims: Mapping[str, Bound]) -> int:
        """Value over concrete dims; raises ExprValueError if unbound, a range, divided by zero or not integral."""
        value = _eval(self.tree, dims)
        if value.denominator != 1:
            raise ExprValueError(f"{self.text} is not an integer ({value}); use ceil(...)")
        return int(value)

    def span(self, dims: Mapping[str, Bound]) -> tuple[int, int]:
        """(least, greatest) value over every value the ranged dims it reads take; ExprValueError when
        any of them is unevaluable (unbound, division by zero, not an integer) or there are too many."""
        lo = hi = None
        for env in assignments(self.names, dims):
            v = self.evaluate(env)
            lo = v if lo is None or v < lo else lo
            hi = v if hi is None or v > hi else hi
        assert lo is not None and hi is not None  # assignments yields at least one environment
        return lo, hi


def show_bound(value: Bound) -> str:
    """`7` or `1..128` (a range)."""
    return str(value) if isinstance(value, int) else f"{value[0]}..{value[1]}"


def assignments(names: Iterable[str], dims: Mapping[str, Bound],
                limit: int = MAX_COMBINATIONS) -> Iterator[dict[str, int]]:
    """Every concrete binding of `names` (ranged dims enumerated, in increasing order, first name slowest).

    Raises ExprValueError when a name is unbound or the ranges hold more than `limit` combinations.
    """
    fixed: dict[str, int] = {}
    ranged: list[tuple[str, range]] = []
    total = 1
    for name in sorted(names):
        value = dims.get(name)
        if value is None:
            raise ExprValueError(f"dim {name} is not bound")
        if isinstance(value, int):
            fixed[name] = value
        else:
            lo, hi = value
            ranged.append((name, range(lo, hi + 1)))
            total *= hi - lo + 1
    if total > limit:
        listing = ", ".join(f"{n}={r.start}..{r.stop - 1}" for n, r in ranged)
        raise ExprValueError(f"{total} combinations of run-time dims ({listing}) are more than the "
                             f"{limit} checked exhaustively")
    if not ranged:
        yield fixed
        return
    keys = [n for n, _ in ranged]
    for values in itertools.product(*(r for _, r in ranged)):
        yield {**fixed, **dict(zip(keys, values, strict=True))}


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
