"""Compile-time refusal of weight types the numerics policy has no rule for (IQ and TQ quants, issue 13).

A model whose projection weights are IQ1_S..IQ4_XS or TQ1_0/TQ2_0 is refused before any kernel is resolved,
with one line naming the tensor, its type and the weight types the policy supports for that op.
"""

from __future__ import annotations

import pytest
from synth_model import write_synth_model

from kernelmap.compiler import CompileOptions, compile_model
from kernelmap.errors import ModelError
from kernelmap.numerics.policy import load_policy

# (type, dims that fit its block size)
REFUSED = [("iq4_nl", {}), ("iq4_xs", {"d": 256, "ffn": 256, "head_dim": 128}),
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
    assert {"q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q4_k", "q6_k", "f16", "bf16", "f32"} <= supported
