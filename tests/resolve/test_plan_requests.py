"""Planner requests (plan/requests.py): run-time dims reach the resolver as ranges, and scratch is sized
over them. Issue 11 item 3: a constraint on prefill rows holds for 1..max_rows, not only at max_rows."""

import json
from pathlib import Path

import pytest
from synth_model import write_synth_model

from kernelmap.circuits.hydrate import hydrate, read_config
from kernelmap.circuits.loader import circuit_for, load_interfaces
from kernelmap.errors import PlanError, ResolutionError
from kernelmap.gguf.reader import open_gguf
from kernelmap.maps import load_map, load_registry
from kernelmap.maps.registry import KERNEL_ROOT, MAPS_DIR, Registry
from kernelmap.numerics import load_policy
from kernelmap.plan.memory import Buffer, plan_memory
from kernelmap.plan.requests import request_for, resolve_graph, runtime_dims, scratch_sizes
from kernelmap.plan.schedule import schedule
from kernelmap.resolve import SelectionTrace

MAX_ROWS = 16


@pytest.fixture(scope="module")
def synth(tmp_path_factory):
    return open_gguf(write_synth_model(tmp_path_factory.mktemp("plan_req") / "s.gguf"))


def _graph(gguf, phase):
    circuit = circuit_for(gguf.metadata["general.architecture"])
    interfaces = load_interfaces()
    config = read_config(circuit, gguf.metadata, gguf.tensors)
    graph = hydrate(circuit, config, gguf.tensors, interfaces, phase=phase, max_rows=MAX_ROWS, kv_dtype="f16")
    return graph, schedule(graph, load_policy("llama-cpu"), interfaces), interfaces


def _with_variant_map(tmp_path: Path, base_id: str, new_id: str, constraints: dict, scratch=None) -> Registry:
    """The builtin registry plus a copy of map `base_id` that outranks it in the same group, under
    `constraints` (the copy reuses the real sources; only its id, symbols and priority differ)."""
    doc = json.loads((MAPS_DIR / f"{base_id}.json").read_text())
    doc["id"] = new_id
    doc["selection"]["priority"] += 1
    for v in doc["variants"]:
        v["symbol"] = f"km_{new_id}__{v['name']}"
    doc["numerics"]["reference"] = f"km_{new_id}__ref"
    doc["constraints"] = constraints
    if scratch is not None:
        doc["scratch"] = scratch
    path = tmp_path / f"{new_id}.json"
    path.write_text(json.dumps(doc))
    return Registry([*load_registry().providers.values(), load_map(path, kernel_root=KERNEL_ROOT)])


def test_request_for_states_prefill_rows_as_the_range_1_to_max_rows(synth):
    for phase, want in (("prefill", (1, MAX_ROWS)), ("decode", 1)):
        graph, contracts, interfaces = _graph(synth, phase)
        embed = graph.ops[0]
        req = request_for(embed, graph, contracts[embed.label], interfaces, frozenset())
        assert req.dims["M"] == want, phase
        assert req.dims["D"] == embed.dims["D"]  # a fixed dim stays one value
    logits = graph.ops[-1]
    assert runtime_dims(logits)["M"] == 1  # the last-row op has one row in every phase


@pytest.mark.parametrize(("constraints", "chosen"), [
    ({"M": {"multiple": 16}}, "embedding_q8_0"),        # 16 = max_rows passes; 1..15 do not
    ({"M": {"max": 8}}, "embedding_q8_0"),              # holds at small prefills only
    ({"M": {"min": 1}}, "embedding_q8_0_rows"),         # holds for every prefill size
])
def test_resolve_graph_checks_prefill_row_constraints_over_the_whole_range(synth, tmp_path, constraints, chosen):
    registry = _with_variant_map(tmp_path, "embedding_q8_0", "embedding_q8_0_rows", constraints)
    graph, contracts, interfaces = _graph(synth, "prefill")
    trace = SelectionTrace()
    resolve_graph(graph, contracts, interfaces, registry, frozenset(), trace)
    assert graph.ops[0].provider == chosen
    if chosen == "embedding_q8_0":
        row = next(r for r in trace.by_label("prefill:embed")[0]["rows"] if r["provider"] == "embedding_q8_0_rows")
        assert row["reason"].startswith("constraint_failed:M:") and "M takes 1..16 at run time" in row["detail"]


def test_resolve_graph_decode_row_is_one_value(synth, tmp_path):
    registry = _with_variant_map(tmp_path, "embedding_q8_0", "embedding_q8_0_rows", {"M": {"equals": 1}})
    graph, contracts, interfaces = _graph(synth, "decode")
    resolve_graph(graph, contracts, interfaces, registry, frozenset(), SelectionTrace())
    assert graph.ops[0].provider == "embedding_q8_0_rows"


def test_scratch_is_sized_at_its_largest_over_the_runtime_rows(synth, tmp_path):
    # 4 * (40 - M) bytes: largest at one row (156), not at max_rows (96).
    registry = _with_variant_map(tmp_path, "embedding_q8_0", "embedding_q8_0_tmp", {},
                                 scratch=[{"name": "tmp", "size": "4 * (40 - M)"}])
    graph, contracts, interfaces = _graph(synth, "prefill")
    resolve_graph(graph, contracts, interfaces, registry, frozenset(), SelectionTrace())
    assert scratch_sizes(graph, registry) == {f"{graph.ops[0].cname}__scratch_tmp": 156}


def test_scratch_negative_for_the_ops_dims_is_a_plan_error_not_a_minimal_buffer(synth, tmp_path):
    registry = _with_variant_map(tmp_path, "embedding_q8_0", "embedding_q8_0_tmp", {},
                                 scratch=[{"name": "tmp", "size": "D - 2 * V"}])
    graph, contracts, interfaces = _graph(synth, "decode")
    resolve_graph(graph, contracts, interfaces, registry, frozenset(), SelectionTrace())
    with pytest.raises(PlanError) as exc:
        scratch_sizes(graph, registry)
    line = exc.value.line()
    assert "decode:embed: cannot size scratch \"tmp\"" in line and "is negative (-576 bytes)" in line
    assert exc.value.pointer == "/scratch/0/size" and exc.value.path.endswith("embedding_q8_0_tmp.json")


def test_plan_memory_refuses_a_negative_buffer():
    with pytest.raises(PlanError, match="negative size"):
        plan_memory([Buffer("a", 64, 0, 1), Buffer("s", -8, 1, 1)])


def test_resolution_error_when_range_constraint_rejects_the_only_provider(synth, tmp_path):
    doc = json.loads((MAPS_DIR / "embedding_q8_0.json").read_text())
    doc["constraints"] = {"M": {"multiple": 16}}
    (tmp_path / "embedding_q8_0.json").write_text(json.dumps(doc))
    others = [p for pid, p in load_registry().providers.items() if pid != "embedding_q8_0"]
    registry = Registry([*others, load_map(tmp_path / "embedding_q8_0.json", kernel_root=KERNEL_ROOT)])
    graph, contracts, interfaces = _graph(synth, "prefill")
    with pytest.raises(ResolutionError, match=r"constraint_failed:M:multiple \[M multiple 16 fails for M=1"):
        resolve_graph(graph, contracts, interfaces, registry, frozenset(), SelectionTrace())
