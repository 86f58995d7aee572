"""Compile-time refusal of weight types the numerics policy has no rule for (IQ and TQ quants, issue 13).

A model whose projection weights are IQ1_S..IQ3_S, IQ4_XS or TQ1_0/TQ2_0 is refused before any kernel is resolved, with
one line naming the tensor, its type and the weight types the policy supports for that op. IQ4_NL has had a rule
since the twentieth session: its synthetic model compiles with the iq4_nl providers.
"""

from __future__ import annotations

import json

import pytest
from synth_model import write_synth_model

from kernelmap.compiler import CompileOptions, compile_model
from kernelmap.errors import ModelError
from kernelmap.numerics.policy import load_policy

# (type, dims that fit its block size)
REFUSED = [("iq4_xs", {"d": 256, "ffn": 256, "head_dim": 128}),
           ("iq2_xxs", {"d": 256, "ffn": 256, "head_dim": 128}), ("tq2_0", {"d": 256, "ffn": 256, "head_dim": 128}),
           ("tq1_0", {"d": 256, "ffn": 256, "head_dim": 128})]


@pytest.mark.parametrize("wtype,dims", REFUSED, ids=[r[0] for r in REFUSED])
def test_compile_refuses_unsupported_weight_type_naming_tensor_type_and_supported(tmp_path, wtype, dims):
    path = write_synth_model(tmp_path / f"{wtype}.gguf", weight_type=wtype, **dims)
    with pytest.raises(ModelError) as info:
        compile_model(path, CompileOptions(fusion=False), out_dir=tmp_path / "build")
    err = info.value
    line = err.line()
    supported = sorted({dict(r.match)["weight"] for r in load_policy("llama-cpu").rules if r.op == "linear"})
    assert err.pointer == "tensors/blk.0.attn_q.weight/type" and err.value == wtype
    assert err.path == str(path) and "\n" not in line
    assert f'"{wtype}"' in line and all(t in line for t in supported), line
    assert not (tmp_path / "build").exists()


def test_supported_list_holds_the_issue_13_types():
    supported = {dict(r.match)["weight"] for r in load_policy("llama-cpu").rules if r.op == "linear"}
    assert {"q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q4_k", "q6_k", "f16", "bf16", "f32", "iq4_nl"} <= supported
    assert not {"iq4_xs", "iq2_xxs", "tq1_0", "tq2_0"} & supported


def test_iq4_nl_model_compiles_with_the_iq4_nl_providers(tmp_path):
    path = write_synth_model(tmp_path / "iq4_nl.gguf", weight_type="iq4_nl")
    model = compile_model(path, CompileOptions(fusion=False), out_dir=tmp_path / "build")
    trace = json.loads((model.build_dir / "selection_trace.json").read_text())
    picked = {e["label"]: e["selected"]["provider"] for e in trace["entries"] if e["request"]["op"] == "linear"
              and e["request"]["ports"]["w"]["dtype"] == "iq4_nl"}
    assert any(label.endswith("blk.0.attn_q") for label in picked), sorted(picked)
    assert set(picked.values()) <= {"linear_iq4_nl_q8_0_ggml", "linear_iq4_nl_q8_0_ggml_c16"}, picked
