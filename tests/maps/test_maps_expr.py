"""Tests for the constraint/scratch expression grammar: parse, evaluate, refuse anything else."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kernelmap.maps.expr import ExprSyntaxError, ExprValueError, parse_expr


def test_expr_precedence_and_ceil_evaluates_exactly():
    e = parse_expr("ceil(N / 8) * (K / 256) * 4 + 2 - -1")
    assert e.names == frozenset({"N", "K"})
    assert e.evaluate({"N": 17, "K": 512}) == 3 * 2 * 4 + 3


def test_expr_integer_literal_is_its_own_expression():
    assert parse_expr(256).evaluate({}) == 256
    assert parse_expr(-3).evaluate({}) == -3


@pytest.mark.parametrize("text", ["", "   ", "1 +", "(K", "K)", "K K", "3 % 2", "K ** 2", "__import__('os')",
                                  "ceil K", "K.real", "1e3", "K; 1"])
def test_expr_malformed_text_raises_syntax_error(text):
    with pytest.raises(ExprSyntaxError):
        parse_expr(text)


def test_expr_non_string_non_int_is_refused():
    for bad in (True, 1.5, None, [1]):
        with pytest.raises(ExprSyntaxError):
            parse_expr(bad)


def test_expr_too_long_is_refused():
    with pytest.raises(ExprSyntaxError, match="longer"):
        parse_expr("1+" * 200 + "1")


@pytest.mark.parametrize(("text", "dims", "fragment"), [
    ("K / 3", {"K": 10}, "not an integer"),
    ("K / (N - N)", {"K": 1, "N": 2}, "division by zero"),
    ("K * Z", {"K": 1}, "Z is not bound"),
])
def test_expr_evaluation_failures_raise_value_error(text, dims, fragment):
    with pytest.raises(ExprValueError, match=fragment):
        parse_expr(text).evaluate(dims)


@given(st.integers(0, 10**6), st.integers(1, 4096))
def test_expr_ceil_division_matches_integer_arithmetic(n, d):
    assert parse_expr(f"ceil(N / {d})").evaluate({"N": n}) == -(-n // d)
