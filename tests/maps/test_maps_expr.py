"""Tests for the constraint/scratch expression grammar: parse, evaluate, refuse anything else."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kernelmap.maps.expr import ExprSyntaxError, ExprValueError, assignments, parse_expr


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


def test_expr_span_is_exact_over_runtime_ranges():
    e = parse_expr("4 * (40 - M) + K")
    assert e.span({"M": (1, 128), "K": 8}) == (4 * (40 - 128) + 8, 4 * 39 + 8)
    assert e.span({"M": 3, "K": 8}) == (4 * 37 + 8,) * 2
    assert parse_expr("7").span({}) == (7, 7)


@pytest.mark.parametrize(("text", "dims", "fragment"), [
    ("K / M", {"K": 6, "M": (1, 4)}, "not an integer"),          # 6/4 at M=4, though 6/1..6/3 are fine
    ("K / (M - 2)", {"K": 6, "M": (1, 3)}, "division by zero"),
    ("K * M", {"K": 6, "M": (0, 1 << 20)}, "more than the"),
    ("K * M", {"M": (1, 2)}, "dim K is not bound"),
])
def test_expr_span_fails_closed_when_any_value_is_unevaluable(text, dims, fragment):
    with pytest.raises(ExprValueError, match=fragment):
        parse_expr(text).span(dims)


def test_expr_evaluate_refuses_a_range_as_one_value():
    with pytest.raises(ExprValueError, match="is a range"):
        parse_expr("M + 1").evaluate({"M": (1, 8)})


def test_assignments_enumerate_every_combination_in_order():
    got = list(assignments({"A", "B", "C"}, {"A": (1, 2), "B": 5, "C": (0, 1)}))
    assert got == [{"B": 5, "A": 1, "C": 0}, {"B": 5, "A": 1, "C": 1}, {"B": 5, "A": 2, "C": 0},
                   {"B": 5, "A": 2, "C": 1}]
