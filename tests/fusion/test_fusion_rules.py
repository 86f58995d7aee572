"""Fusion rules and the fuser on hydrated synthetic graphs: matching, priority, overlap, capabilities, class chain."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from synth_model import write_synth_model

from kernelmap.circuits.hydrate import hydrate, read_config
from kernelmap.circuits.loader import Interfaces, circuit_for, load_interfaces
from kernelmap.errors import PlanError
from kernelmap.gguf.reader import open_gguf
from kernelmap.maps.registry import load_registry
from kernelmap.plan.fuse import RULES_DIR, fuse, fusion_lines, load_rules, parse_rules, rules_digest
from kernelmap.runtime.kernel_table import AvailableKernels, available_kernels
from kernelmap.target import target_features

BASE = {
    "id": "residual_add_rmsnorm",
    "pattern": [
        {"op": "residual_add", "ports": {"a": "a", "b": "b", "y": "y"}},
        {"op": "rmsnorm", "via": {"from": "y", "to": "x"}, "ports": {"w": "w", "y": "h"}},
    ],
    "fused_op": "residual_add_rmsnorm",
    "priority": 100,
    "requires": ["kernel:residual_add_rmsnorm_f32"],
}


@pytest.fixture(scope="module")
def synth(tmp_path_factory):
    return write_synth_model(tmp_path_factory.mktemp("fuse_rules") / "f32.gguf")


def _graph(path, phase="prefill"):
    gguf = open_gguf(path)
    circuit = circuit_for("gemma3")
    interfaces = load_interfaces()
    config = read_config(circuit, gguf.metadata, gguf.tensors)
    return hydrate(circuit, config, gguf.tensors, interfaces, phase=phase, max_rows=8, kv_dtype="f16")


def _rules(tmp_path: Path, *entries: dict, name: str = "toy") -> list:
    doc = {"schema": "kernelmap.fusion_rules/1", "class": name, "parent": None, "rules": list(entries)}
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(doc))
    return load_rules(name, rules_dir=tmp_path)


def _available(*map_ids: str) -> AvailableKernels:
    registry = load_registry()
    kernels = {(pid, v.name, v.symbol) for pid in map_ids for v in registry.providers[pid].variants}
    return AvailableKernels(Path("probe"), frozenset(kernels), frozenset(registry.providers), target_features())


def _check_ssa(graph):
    seen = {name for name, t in graph.tensors.items() if t.kind == "input"}
    for op in graph.ops:
        for tname in op.inputs.values():
            assert tname in seen, f"{op.label} reads {tname} before it is written"
            assert tname in graph.tensors
        seen.update(op.outputs.values())
        for tname in op.outputs.values():
            assert graph.tensors[tname].producer == op.label


def test_fuse_shipped_rules_replace_residual_add_then_rmsnorm(synth):
    graph = _graph(synth)
    before = len(graph.ops)
    records = fuse(graph, load_rules("x86_64"), _available("residual_add_rmsnorm_f32"))
    applied = [r for r in records if r["decision"] == "applied"]
    # 2 layers: attn residual -> ffn norm twice, ffn residual -> next attn norm once, and the last ffn residual
    # -> the final norm: the last layer's ops after attention compute only the last row, like the final norm
    # (the circuit's rows_when), so the two match in rows and fuse
    assert [r["ops"] for r in applied] == [["blk.0.attn_residual", "blk.0.ffn_norm"],
                                           ["blk.0.ffn_residual", "blk.1.attn_norm"],
                                           ["blk.1.attn_residual", "blk.1.ffn_norm"],
                                           ["blk.1.ffn_residual", "final_norm"]]
    skipped = [r for r in records if r["decision"] == "skipped"]
    assert skipped == [
        {"rule": "qk_norm_rope_neox", "decision": "skipped", "priority": 100, "ops": [],
         "reason": "not available: kernel:qk_norm_rope_neox_f32"}]
    assert len(graph.ops) == before - 4
    fused = [op for op in graph.ops if op.op == "residual_add_rmsnorm"]
    assert fused[0].interface == "residual_add_rmsnorm.row_major.v1"
    assert set(fused[0].inputs) == {"a", "b"} and set(fused[0].outputs) == {"y", "h"}
    assert set(fused[0].weights) == {"w"} and fused[0].params == {"eps": pytest.approx(1e-6)}
    assert fused[0].dynamic_dims == {"M": "n_tokens"}
    _check_ssa(graph)


def test_fuse_shipped_rules_replace_qk_norm_then_neox_rope(synth):
    graph = _graph(synth, phase="decode")
    records = fuse(graph, load_rules("x86_64"), _available("residual_add_rmsnorm_f32", "qk_norm_rope_neox_f32"))
    applied = [r["ops"] for r in records if r["decision"] == "applied" and r["rule"] == "qk_norm_rope_neox"]
    assert applied == [["blk.0.k_norm", "blk.0.k_rope"], ["blk.0.q_norm", "blk.0.q_rope"],
                       ["blk.1.k_norm", "blk.1.k_rope"], ["blk.1.q_norm", "blk.1.q_rope"]]
    fused = [op for op in graph.ops if op.op == "qk_norm_rope"]
    assert fused[0].label == "blk.0.q_norm.blk0_q_rope"
    assert set(fused[0].params) == {"eps", "freq_base", "freq_scale"} and fused[0].policy_keys == {"style": "neox"}
    assert fused[0].dims == {"M": 1, "H": 2, "D": 32}
    assert not any(name.startswith("t_qn_") or name.startswith("t_kn_") for name in graph.tensors)
    _check_ssa(graph)


def test_fuse_policy_filter_skips_rope_of_another_style(synth):
    graph = _graph(synth, phase="decode")
    for op in graph.ops:
        if op.op == "rope":
            op.policy_keys = {"style": "normal"}
    records = fuse(graph, load_rules("x86_64"), _available("qk_norm_rope_neox_f32"))
    assert [r["reason"] for r in records if r["rule"] == "qk_norm_rope_neox"] == ["no match in this graph"]
    assert not any(op.op == "qk_norm_rope" for op in graph.ops)


def test_fuse_is_deterministic_across_rule_order(synth, tmp_path):
    low = {**BASE, "id": "zz_low", "priority": 10}
    a, b = _graph(synth), _graph(synth)
    rules = _rules(tmp_path, BASE, low)
    ra = fuse(a, rules, _available("residual_add_rmsnorm_f32"))
    rb = fuse(b, list(reversed(rules)), _available("residual_add_rmsnorm_f32"))
    assert ra == rb
    assert [op.label for op in a.ops] == [op.label for op in b.ops]


def test_fuse_overlapping_rules_resolve_by_priority(synth, tmp_path):
    low = {**BASE, "id": "add_norm_low", "priority": 50, "requires": ["kernel:rmsnorm_f32"]}
    graph = _graph(synth)
    records = fuse(graph, _rules(tmp_path, BASE, low), _available("residual_add_rmsnorm_f32", "rmsnorm_f32"))
    low_records = [r for r in records if r["rule"] == "add_norm_low"]
    assert low_records and all(r["decision"] == "skipped" for r in low_records)
    assert {r["reason"] for r in low_records if r["ops"][1] != "final_norm"} == {
        "overlaps residual_add_rmsnorm (priority 100)"}
    assert all(op.inserted_by != "fusion:add_norm_low" for op in graph.ops)


def test_fuse_equal_priority_overlap_is_an_error_naming_both_rules(synth, tmp_path):
    twin = {**BASE, "id": "add_norm_twin", "requires": ["kernel:rmsnorm_f32"]}
    with pytest.raises(PlanError) as info:
        fuse(_graph(synth), _rules(tmp_path, BASE, twin), _available("residual_add_rmsnorm_f32", "rmsnorm_f32"))
    assert 'fusion rules "add_norm_twin" and "residual_add_rmsnorm" match overlapping ops' in str(info.value)
    assert "equal priority 100" in str(info.value)


def test_fuse_present_kernel_is_visible_so_lower_rule_never_wins(synth, tmp_path):
    """The fuser probes the full kernel library: a fused kernel no unfused plan launches is still seen."""
    low = {**BASE, "id": "add_norm_low", "priority": 50, "requires": ["kernel:rmsnorm_f32"]}
    rules = _rules(tmp_path, BASE, low)
    registry = load_registry()
    isa = target_features()
    full = available_kernels(registry, isa, only=["residual_add_rmsnorm_f32", "rmsnorm_f32", "residual_add_f32"])
    assert full.has_map("residual_add_rmsnorm_f32")
    graph = _graph(synth)
    records = fuse(graph, rules, full)
    assert {r["rule"] for r in records if r["decision"] == "applied"} == {"residual_add_rmsnorm"}
    # what a probe of an unfused model's library would see: the fused kernel hidden, the lower rule wins
    hidden = _graph(synth)
    hidden_records = fuse(hidden, rules, _available("rmsnorm_f32", "residual_add_f32"))
    assert {r["rule"] for r in hidden_records if r["decision"] == "applied"} == {"add_norm_low"}
    assert [r["reason"] for r in hidden_records if r["rule"] == "residual_add_rmsnorm"] == [
        "not available: kernel:residual_add_rmsnorm_f32"]


@pytest.mark.parametrize("cap, fragment", [
    ("gpu:tensor_cores", 'capability kind "gpu" cannot be probed'),
    ("kernel:no_such_map", 'names kernel map "no_such_map" that no map defines'),
    ("isa:avx9000", 'names unknown ISA feature "avx9000"'),
])
def test_fuse_rule_with_unknown_capability_is_refused_with_its_id(synth, tmp_path, cap, fragment):
    bad = {**BASE, "id": "needs_magic", "priority": 5, "requires": [cap]}
    with pytest.raises(PlanError) as info:
        fuse(_graph(synth), _rules(tmp_path, BASE, bad), _available("residual_add_rmsnorm_f32"))
    assert f'fusion rule "needs_magic" requires "{cap}", which the runtime cannot probe' in str(info.value)
    assert fragment in str(info.value)
    assert info.value.pointer == "/requires"


def test_fuse_missing_isa_capability_skips_with_reason(synth, tmp_path):
    rule = {**BASE, "requires": ["kernel:residual_add_rmsnorm_f32", "isa:avx512_fp16"]}
    avail = _available("residual_add_rmsnorm_f32")
    avail = AvailableKernels(avail.library, avail.kernels, avail.known, frozenset({"avx2"}))
    graph = _graph(synth)
    records = fuse(graph, _rules(tmp_path, rule), avail)
    assert records == [{"rule": "residual_add_rmsnorm", "decision": "skipped", "priority": 100,
                        "reason": "not available: isa:avx512_fp16", "ops": []}]
    assert not any(op.op == "residual_add_rmsnorm" for op in graph.ops)


def test_fuse_rule_whose_ports_miss_the_fused_interface_is_refused(synth, tmp_path):
    rule = {"id": "norm_linear", "fused_op": "residual_add_rmsnorm", "priority": 1, "requires": [],
            "pattern": [{"op": "rmsnorm", "ports": {"x": "a", "w": "w"}},
                        {"op": "linear", "via": {"from": "y", "to": "x"}, "ports": {"w": "b", "y": "y"}}]}
    with pytest.raises(PlanError, match="fused ports do not equal the ports of residual_add_rmsnorm"):
        fuse(_graph(synth), _rules(tmp_path, rule), _available())


def test_fuse_internal_intermediate_with_other_reader_is_skipped(synth, tmp_path):
    base = load_interfaces()
    iface = {"op": "rmsnorm_linear", "params": {"eps": "float"}, "ports": {
        "x": {"role": "input", "shape": ["M", "K"], "layout": "row_major"},
        "nw": {"role": "weight", "shape": ["K"]},
        "w": {"role": "weight", "shape": ["N", "K"]},
        "y": {"role": "output", "shape": ["M", "N"], "layout": "row_major", "dtype": "f32"}}}
    interfaces = Interfaces(base.path, {**base.by_id, "rmsnorm_linear.v1": iface}, base.sha256)
    rule = {"id": "norm_linear", "fused_op": "rmsnorm_linear", "priority": 1, "requires": [],
            "pattern": [{"op": "rmsnorm", "ports": {"x": "x", "w": "nw"}},
                        {"op": "linear", "via": {"from": "y", "to": "x"}, "ports": {"w": "w", "y": "y"}}]}
    graph = _graph(synth)
    before = [op.label for op in graph.ops]
    records = fuse(graph, _rules(tmp_path, rule), _available(), interfaces=interfaces)
    first = [r for r in records if r["ops"] == ["blk.0.attn_norm", "blk.0.attn_q"]]
    assert first == [{"rule": "norm_linear", "decision": "skipped", "priority": 1, "ops": first[0]["ops"],
                      "reason": "intermediate t_h_0 is also read by blk.0.attn_k"}]
    # the final norm feeds only the logits projection, but the two ops bind dim N differently
    last = [r for r in records if r["ops"] == ["final_norm", "logits"]]
    assert [r["reason"] for r in last] == ["dim N differs (64 vs 320)"]
    assert not any(r["decision"] == "applied" for r in records)
    assert [op.label for op in graph.ops] == before


def test_load_rules_child_class_patches_parent_rule_by_id(tmp_path):
    (tmp_path / "base.json").write_text(json.dumps(
        {"schema": "kernelmap.fusion_rules/1", "class": "base", "parent": None, "rules": [BASE]}))
    (tmp_path / "child.json").write_text(json.dumps(
        {"schema": "kernelmap.fusion_rules/1", "class": "child", "parent": "base",
         "rules": [{"id": "residual_add_rmsnorm", "priority": 7}]}))
    (rule,) = load_rules("child", rules_dir=tmp_path)
    assert rule.priority == 7 and rule.fused_op == "residual_add_rmsnorm"
    assert rule.source.endswith("child.json#/rules/0")
    (base_rule,) = load_rules("base", rules_dir=tmp_path)
    assert base_rule.priority == 100


def test_load_rules_unknown_class_and_bad_patch_fail_closed(tmp_path):
    with pytest.raises(PlanError, match='no fusion rules for CPU class "riscv64"'):
        load_rules("riscv64")
    with pytest.raises(PlanError, match='new rule "fresh" lacks pattern, fused_op, requires'):
        parse_rules([(tmp_path / "x.json", {"rules": [{"id": "fresh", "priority": 3}]})])
    (tmp_path / "bad.json").write_text(json.dumps(
        {"schema": "kernelmap.fusion_rules/1", "class": "bad", "rules": [{"id": "x", "prio": 1}]}))
    with pytest.raises(PlanError) as info:
        load_rules("bad", rules_dir=tmp_path)
    assert info.value.pointer == "/rules/0"


def test_shipped_rule_files_load_for_every_class():
    for path in sorted(RULES_DIR.glob("*.json")):
        rules = load_rules(path.stem)
        assert {r.id for r in rules} == {"residual_add_rmsnorm", "qk_norm_rope_neox",
                                         "residual_add_rmsnorm_quantize_q8_0_rne",
                                         "residual_add_rmsnorm_quantize_q8_k", "geglu_quantize_q8_0_rne",
                                         "geglu_quantize_q8_k"}, path.name


def test_rules_digest_changes_with_any_file_of_the_chain(tmp_path):
    (tmp_path / "base.json").write_text(json.dumps(
        {"schema": "kernelmap.fusion_rules/1", "class": "base", "parent": None, "rules": [BASE]}))
    (tmp_path / "child.json").write_text(json.dumps(
        {"schema": "kernelmap.fusion_rules/1", "class": "child", "parent": "base", "rules": []}))
    before = rules_digest("child", rules_dir=tmp_path)
    (tmp_path / "base.json").write_text(json.dumps(
        {"schema": "kernelmap.fusion_rules/1", "class": "base", "parent": None, "rules": [{**BASE, "priority": 3}]}))
    assert rules_digest("child", rules_dir=tmp_path) != before


def test_fusion_lines_render_one_line_per_record(synth):
    graph = _graph(synth, phase="decode")
    records = fuse(graph, load_rules("x86_64"), _available("residual_add_rmsnorm_f32"))
    lines = fusion_lines(records)
    assert lines[0] == "skipped  qk_norm_rope_neox (priority 100): -; not available: kernel:qk_norm_rope_neox_f32"
    assert "applied  residual_add_rmsnorm (priority 100): blk.0.attn_residual + blk.0.ffn_norm; priority 100" in lines


def test_fuse_refuses_a_resolved_graph(synth):
    graph = _graph(synth, phase="decode")
    graph.ops[3].provider = "rmsnorm_f32"
    with pytest.raises(PlanError, match="fusion runs on the logical graph, before resolution"):
        fuse(graph, load_rules("x86_64"), _available("residual_add_rmsnorm_f32"))


def test_fuse_refuses_ops_that_differ_in_rows(synth):
    """A residual add over all rows feeding a last-row norm (a circuit without rows_when on its last layer) is
    not fused: the fused op would have to be one or the other."""
    graph = _graph(synth)
    for op in graph.ops:
        if op.label == "blk.1.ffn_residual":
            op.rows_last = False
    records = fuse(graph, load_rules("x86_64"), _available("residual_add_rmsnorm_f32"))
    assert {"rule": "residual_add_rmsnorm", "decision": "skipped", "priority": 100,
            "reason": "the matched ops differ in rows (all vs last)",
            "ops": ["blk.1.ffn_residual", "final_norm"]} in records
    assert ["blk.1.ffn_residual", "final_norm"] not in [r["ops"] for r in records if r["decision"] == "applied"]


def test_fuse_scheduled_stage_matches_contracts_and_updates_them(tmp_path):
    from synth_model import write_synth_model

    from kernelmap.numerics.policy import load_policy
    from kernelmap.plan.schedule import schedule

    policy = load_policy("llama-cpu")  # ships the fused ops' rules
    graph = _graph(write_synth_model(tmp_path / "q8.gguf", weight_type="q8_0"), phase="decode")
    rules = load_rules("x86_64")
    avail = _available("residual_add_rmsnorm_f32", "residual_add_rmsnorm_quantize_q8_0_rne")
    logical = fuse(graph, rules, avail)
    assert {r["rule"] for r in logical} == {"residual_add_rmsnorm", "qk_norm_rope_neox"}  # stage filter
    contracts = schedule(graph, policy, load_interfaces())
    records = fuse(graph, rules, avail, contracts=contracts)
    applied = [r for r in records if r["decision"] == "applied"]
    assert [r["ops"] for r in applied][0] == ["blk.0.attn_residual.blk0_ffn_norm",
                                              "blk.0.attn_residual.blk0_ffn_norm.quantize_q8_0"]
    # 4: the last layer's pairs are last-row ops with last-row quantizers (plan/schedule.py), so they fuse too
    assert len(applied) == 4 and {r["rule"] for r in applied} == {"residual_add_rmsnorm_quantize_q8_0_rne"}
    assert [r["reason"] for r in records if r["rule"] == "residual_add_rmsnorm_quantize_q8_k"] == [
        "not available: kernel:residual_add_rmsnorm_quantize_q8_k"]
    fused = [op for op in graph.ops if op.op == "residual_add_rmsnorm_quantize"]
    assert set(fused[0].outputs) == {"y", "q"} and graph.tensors[fused[0].outputs["q"]].dtype == "q8_0"
    assert contracts[fused[0].label] == "residual_add_rmsnorm_quantize.q8_0.rne.v1"
    assert set(contracts) == {op.label for op in graph.ops}
    _check_ssa(graph)


def test_load_rules_scheduled_rule_without_fused_contract_is_refused(tmp_path):
    bad = {**BASE, "stage": "scheduled"}
    with pytest.raises(PlanError, match="a scheduled-stage rule names the fused contract"):
        _rules(tmp_path, bad)
