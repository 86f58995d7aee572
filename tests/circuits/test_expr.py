"""Circuit expressions: the whitelist grammar evaluates rules and refuses anything else."""

import pytest

from kernelmap.circuits.expr import Expr, evaluate
from kernelmap.errors import CircuitError


def test_expr_evaluates_layer_rule():
    rule = Expr("layer % swa_period < swa_period - 1")
    assert [rule({"layer": i, "swa_period": 6}) for i in range(7)] == [True] * 5 + [False, True]


def test_expr_conditional_and_functions():
    assert evaluate("window if sliding else 0", {"window": 512, "sliding": False}) == 0
    assert evaluate("1 / sqrt(head_dim)", {"head_dim": 256}) == 0.0625
    assert evaluate("max(ceil(a / 3), 2)", {"a": 10}) == 4
    assert evaluate(7, {}) == 7


@pytest.mark.parametrize("text", [
    "__import__('os').system('x')", "a.b", "[1, 2]", "lambda: 1", "x[0]", "'str'", "open('f')", "f(x=1)",
])
def test_expr_refuses_constructs_outside_grammar(text):
    with pytest.raises(CircuitError) as err:
        Expr(text, where="c.json", pointer="/layer_attrs/x")
    assert err.value.path == "c.json" and err.value.pointer == "/layer_attrs/x"


def test_expr_unknown_name_is_one_line_error():
    with pytest.raises(CircuitError, match="unknown value 'nope'"):
        evaluate("nope + 1", {"a": 1})


def test_expr_division_by_zero_is_circuit_error():
    with pytest.raises(CircuitError, match="cannot be evaluated"):
        evaluate("1 / a", {"a": 0})
