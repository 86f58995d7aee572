"""Binding and C safety: literals are exact, comments are sanitized, unsafe names never reach C."""

import numpy as np
import pytest

from kernelmap.codegen.bind import c_comment, c_type_of, check_ident, check_label, float_literal
from kernelmap.errors import PlanError


def test_float_literal_is_exact_f32():
    for v in (1e-6, 0.0625, 25.298221281347036, -3.5, 1e6):
        lit = float_literal(v)
        assert lit.endswith("f")
        assert float.fromhex(lit[:-1]) == float(np.float32(v))


def test_float_literal_refuses_non_finite():
    with pytest.raises(PlanError):
        float_literal(float("inf"))


@pytest.mark.parametrize("text", ['*/ int x; /*', "a\\\nb", "??/", "\u00e9\u202e", "\x00\x1b[2J", "/* nested */"])
def test_c_comment_strips_everything_that_could_escape(text):
    out = c_comment(text)
    assert "*/" not in out and "/*" not in out and "\\" not in out and "??" not in out
    assert all(32 <= ord(ch) < 127 for ch in out)


@pytest.mark.parametrize("bad", ["a b", "1abc", "x;y", "", "a-b", "é"])
def test_check_ident_refuses_non_identifiers(bad):
    with pytest.raises(PlanError):
        check_ident(bad)


def test_check_label_refuses_quotes():
    with pytest.raises(PlanError):
        check_label('blk.0"); evil("')


def test_c_type_of_rejects_unlisted_casts():
    spec = {"id": "m", "params": [{"name": "eps", "type": "float"}]}
    assert c_type_of({"name": "eps", "source": "param:eps"}, spec) == "float"
    assert c_type_of({"name": "y", "source": "output:y", "cast": "float *"}, spec) == "float *"
    assert c_type_of({"name": "ith", "source": "runtime:ith"}, spec) == "int"
    with pytest.raises(PlanError):
        c_type_of({"name": "y", "source": "output:y", "cast": "float *); system(\"x\""}, spec)
