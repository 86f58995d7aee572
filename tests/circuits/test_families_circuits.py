"""Family circuits as data: hydration of the committed tiny fixtures (no compile), the GGUF-key and tensor checks,
row slices of fused tensors, conditional ops, and the expression extensions they use."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelmap.circuits.expr import evaluate
from kernelmap.circuits.hydrate import hydrate, read_config
from kernelmap.circuits.loader import circuit_for, load_interfaces
from kernelmap.errors import ModelError
from kernelmap.gguf.reader import open_gguf

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "families" / "models"


def _graph(name, phase="decode", metadata=None, tensors=None):
    g = open_gguf(FIX / f"{name}.gguf")
    md = dict(g.metadata) if metadata is None else metadata(dict(g.metadata))
    tt = dict(g.tensors) if tensors is None else tensors(dict(g.tensors))
    c = circuit_for(md["general.architecture"])
    cfg = read_config(c, md, tt, source=name)
    return cfg, hydrate(c, cfg, tt, load_interfaces(), phase=phase, max_rows=8, kv_dtype="f16")


@pytest.mark.parametrize("name", ["llama-Q8_0", "qwen2-Q4_K_M", "qwen3-Q4_0", "phi3-Q8_0", "qwen3moe-Q4_K_M"])
def test_family_circuit_hydrates_both_phases_and_reads_every_tensor(name):
    for phase in ("decode", "prefill"):
        cfg, graph = _graph(name, phase)
        read = {ref.tensor for op in graph.ops for ref in op.weights.values()}
        assert read == set(open_gguf(FIX / f"{name}.gguf").tensors), name
        assert cfg["vocab"] == graph.tensors[graph.outputs["logits"]].shape[-1]


def test_llama_with_rope_freqs_uses_rope_ff_and_without_uses_plain_rope():
    _, graph = _graph("llama-Q8_0")
    ropes = [op for op in graph.ops if op.op.startswith("rope")]
    assert {op.op for op in ropes} == {"rope_ff"} and all(op.policy_keys == {"style": "normal"} for op in ropes)
    assert ropes[0].weights["f"].tensor == "rope_freqs.weight"
    _, plain = _graph("llama-Q8_0", tensors=lambda t: {k: v for k, v in t.items() if k != "rope_freqs.weight"})
    assert {op.op for op in plain.ops if op.op.startswith("rope")} == {"rope"}


def test_qwen2_biases_follow_the_projections_and_qwen3_norms_precede_rope():
    _, graph = _graph("qwen2-Q8_0")
    labels = [op.label for op in graph.ops if op.layer == 0]
    assert labels.index("blk.0.attn_q_bias") == labels.index("blk.0.attn_q") + 1
    _, g3 = _graph("qwen3-Q8_0")
    ops = [op.op for op in g3.ops if op.layer == 0]
    assert ops.index("qk_norm") < ops.index("rope") and "bias_add" not in ops
    attn = next(op for op in g3.ops if op.op == "attention_kq")
    assert attn.params["scale"] == pytest.approx(128 ** -0.5, rel=1e-7) and attn.dims["D"] == 128


def test_phi3_reads_fused_tensors_as_row_slices_and_prescales_q():
    cfg, graph = _graph("phi3-Q8_0")
    w = {op.label.split(".")[-1]: op.weights["w"] for op in graph.ops if op.layer == 1 and "w" in op.weights
         and op.weights["w"].rows is not None}
    n = cfg["n_heads"] * cfg["head_dim"]
    assert w["attn_q_fused"].rows == (0, n) and w["attn_k_fused"].rows == (n, n + 256)
    assert w["attn_v_fused"].rows == (n + 256, n + 512) and w["attn_v_fused"].tensor == "blk.1.attn_qkv.weight"
    assert w["ffn_gate_fused"].rows == (0, cfg["ffn_dim"]) and w["ffn_up_fused"].rows == (cfg["ffn_dim"], 2 * cfg["ffn_dim"])
    assert len({ref.cname for ref in w.values()}) == 5
    attn = next(op for op in graph.ops if op.layer == 1 and op.op.startswith("attention"))
    assert attn.op == "attention"  # Q scaled before the f16 rounding, kq_scale 1 (llama.cpp's phi3 graph)


def test_qwen3moe_routes_top_k_of_the_experts():
    cfg, graph = _graph("qwen3moe-Q4_K_M")
    router = next(op for op in graph.ops if op.op == "moe_router")
    assert (router.dims["E"], router.dims["U"], router.params["norm"]) == (4, 2, 1)
    down = next(op for op in graph.ops if op.label.endswith("moe_down"))
    assert down.dims["XS"] == 2 and down.dims["K"] == cfg["expert_ffn"] == 256
    assert graph.tensors[router.outputs["ids"]].dtype == "i32"


def test_phi3_sliding_window_is_ignored_as_llama_cpp_ignores_it():
    cfg, _ = _graph("phi3-Q8_0")  # the fixture has phi3.attention.sliding_window
    assert "window" not in cfg


def test_unknown_key_and_unread_math_key_are_refused_by_name():
    with pytest.raises(ModelError) as err:
        _graph("qwen2-Q8_0", metadata=lambda md: {**md, "qwen2.final_logit_softcapping": 30.0})
    assert err.value.pointer == "qwen2.final_logit_softcapping" and "changes the arithmetic" in err.value.message
    with pytest.raises(ModelError) as err:
        _graph("qwen2-Q8_0", metadata=lambda md: {**md, "qwen2.brand_new": 1})
    assert err.value.pointer == "qwen2.brand_new" and "unknown metadata key" in err.value.message


def test_str_setting_outside_its_values_is_refused_with_the_allowed_ones():
    with pytest.raises(ModelError) as err:
        _graph("llama-Q8_0", metadata=lambda md: {**md, "llama.rope.scaling.type": "longrope"})
    assert err.value.pointer == "llama.rope.scaling.type" and err.value.expected == ["none", "linear"]
    cfg, _ = _graph("llama-Q8_0", metadata=lambda md: {**md, "llama.rope.scaling.type": "none",
                                                       "llama.rope.scaling.factor": 8.0})
    assert cfg["freq_scale"] == 1.0  # scaling type none: llama.cpp never scales positions
    cfg, _ = _graph("llama-Q8_0", metadata=lambda md: {**md, "llama.rope.scaling.factor": 3.0})
    assert cfg["freq_scale"] == evaluate("f32(1 / 3)", {})


def test_f32_rounds_like_c_float_arithmetic():
    # 1.0f / sqrtf(96.0f) differs in the last bit from the double expression rounded once
    assert evaluate("f32(1 / f32(sqrt(96)))", {}) == float.fromhex("0x1.a20bd6p-4")
    assert evaluate("f32(1 / sqrt(96))", {}) == float.fromhex("0x1.a20bd8p-4")


def test_row_slice_outside_the_tensor_is_refused():
    from kernelmap.circuits import hydrate as hyd

    class Short:
        def __init__(self, t):
            self.type_name, self.shape = t.type_name, (t.shape[0], 700)

    # a fused tensor of other rows than Q, K and V need is refused by the circuit's tensor_shapes (too few rows would
    # put a slice outside the tensor; too many would leave rows no op reads)
    with pytest.raises(ModelError, match="contradicts the tensor shapes: blk.0.attn_qkv.weight"):
        _graph("phi3-Q8_0", tensors=lambda t: {k: (Short(v) if k == "blk.0.attn_qkv.weight" else v) for k, v in t.items()})
    assert hyd.op_active({"if_tensor": "blk.{layer}.x"}, 3, {}, {"blk.3.x": None}, "w", "/p")
