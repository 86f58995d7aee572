"""km_kernels.h: named prototypes from call_abi, force-included into each kernel unit, checked by the compiler.

Issue 11 item 4: the header carries the compile-time checks that are cheap in C (parameter types and
count per selected kernel; no undeclared export from a kernel unit). Names are checked by the audit.
"""

import subprocess

import pytest

from kernelmap.build.driver import compiler
from kernelmap.circuits.graph import Graph, OpNode, Tensor
from kernelmap.codegen.bind import bind_call
from kernelmap.codegen.emit import kernels_header
from kernelmap.errors import PlanError

SPEC = {"id": "toy_scale", "params": [{"name": "scale", "type": "float"}], "call_abi": {"version": 1, "params": [
    {"name": "y", "source": "output:y", "cast": "float *"}, {"name": "x", "source": "activation:x", "cast": "const float *"},
    {"name": "M", "source": "dim:M"}, {"name": "scale", "source": "param:scale", "cast": "float"},
    {"name": "ith", "source": "runtime:ith"}, {"name": "nth", "source": "runtime:nth"}]}}
GOOD = ("void km_toy_scale__ref(float *y, const float *x, int64_t M, float scale, int ith, int nth) {\n"
        "    (void)ith; (void)nth; for (int64_t m = 0; m < M; m++) y[m] = x[m] * scale;\n}\n")


def _call(spec=SPEC):
    graph = Graph("decode", 1, [], {"t_x": Tensor("t_x", "f32", (1, 4)), "t_y": Tensor("t_y", "f32", (1, 4))}, {}, {}, {})
    op = OpNode("blk.0.scale", "blk0_scale", "scale", 0, "scale.v1", {"x": "t_x"}, {"y": "t_y"}, dims={"M": 1},
                params={"scale": 0.5})
    return bind_call(op, spec, "km_toy_scale__ref", graph, {"t_x": 0, "t_y": 64}, {}, {})


def _compile(tmp_path, source: str) -> subprocess.CompletedProcess:
    call = _call()
    header = tmp_path / "km_kernels.h"
    header.write_text(kernels_header({call.symbol: call.prototype}))
    unit = tmp_path / "unit.c"
    unit.write_text("#include <stdint.h>\n" + source)
    return subprocess.run([compiler(), "-std=c11", "-Wall", "-Wextra", "-Werror", "-fsyntax-only", "-include",
                           str(header), str(unit)], capture_output=True, text=True)


def test_prototype_carries_the_map_parameter_names():
    assert _call().prototype == ("void km_toy_scale__ref(float *y, const float *x, int64_t M, float scale, int ith, "
                                 "int nth);")


def test_header_accepts_the_matching_definition_and_static_helpers(tmp_path):
    proc = _compile(tmp_path, "static int helper(int a) { return a; }\n" + GOOD)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize(("source", "fragment"), [
    (GOOD.replace("int64_t M, float scale", "int32_t M, float scale"), "conflicting types for 'km_toy_scale__ref'"),
    (GOOD.replace(", int nth)", ")").replace("(void)nth; ", ""), "conflicting types for 'km_toy_scale__ref'"),
    (GOOD + "int km_toy_scale__ref_check(int a) { return a; }\n", "no previous prototype for 'km_toy_scale__ref_check'"),
])
def test_header_makes_the_compiler_refuse_a_disagreeing_unit(tmp_path, source, fragment):
    proc = _compile(tmp_path, source)
    assert proc.returncode != 0 and fragment in proc.stderr.replace("\u2018", "'").replace("\u2019", "'"), proc.stderr


def test_prototype_refuses_a_keyword_as_parameter_name():
    spec = {**SPEC, "call_abi": {"version": 1, "params": [{"name": "int", "source": "dim:M"}]}}
    with pytest.raises(PlanError, match="C keyword"):
        _call(spec)
