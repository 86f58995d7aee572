"""Resolver tests on synthetic maps: the seed's evidence case, every reason code, faults, determinism."""

import json
import random
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mapgen import make_map, write_maps

from kernelmap.errors import RequestError, ResolutionError
from kernelmap.maps import load_registry
from kernelmap.maps.registry import Registry
from kernelmap.resolve import Request, resolve

AVX2 = frozenset({"avx2", "fma", "f16c"})
AVX512 = AVX2 | {"avx512f", "avx512bw", "avx512vl", "avx512dq"}
Q4K_PORTS = {"x": ("q8_k", "row_major"), "w": ("q4_k", "ggml_blocks"), "y": ("f32", "row_major")}


def registry(tmp_path: Path, maps: list[dict]) -> Registry:
    mdir, kdir = write_maps(tmp_path, maps)
    return load_registry([mdir], builtin=False, kernel_root=kdir)


def req(**kw) -> Request:
    base = {"op": "linear", "phase": "decode", "ports": Q4K_PORTS, "dims": {"M": 1, "N": 640, "K": 1024},
            "isa": AVX2, "label": "blk.3.attn_q"}
    base.update(kw)
    return Request(**base)


def by_provider(entry: dict) -> dict[str, dict]:
    return {r["provider"]: r for r in entry["rows"] if "variant" not in r or r["stage"] == "rank"}


def test_resolve_seed_evidence_case_selects_compatible_100_at_rank_0(tmp_path):
    reg = registry(tmp_path, [
        make_map("candidate_900", status="candidate", priority=900),
        make_map("wrong_phase_800", priority=800, phases=("prefill",)),
        make_map("wrong_dtype_700", priority=700, weight="q8_0", act="q8_k", group="linear.q4_k.q8_k.f32.v1"),
        make_map("compatible_100", priority=100),
    ])
    res = resolve(req(), reg)
    assert (res.provider.id, res.variant.name) == ("compatible_100", "avx2")
    rows = by_provider(res.trace_entry)
    assert rows["candidate_900"]["reason"] == "status_not_production:candidate"
    assert rows["candidate_900"]["stage"] == "status" and rows["candidate_900"]["priority"] == 900
    assert rows["wrong_phase_800"]["reason"] == "phase_mismatch"
    assert rows["wrong_dtype_700"]["reason"] == "dtype_mismatch:w"
    assert rows["compatible_100"]["decision"] == "selected" and rows["compatible_100"]["rank"] == 0
    assert res.trace_entry["selected"] == {"provider": "compatible_100", "variant": "avx2",
                                           "symbol": "km_compatible_100__avx2"}
    assert sum(r["decision"] == "selected" for r in res.trace_entry["rows"]) == 1


def test_rank_refuses_survivors_across_groups_even_with_unequal_priorities(tmp_path):
    reg = registry(tmp_path, [make_map("lin_a", priority=900, group="linear.q4_k.q8_k.f32.a.v1"),
                              make_map("lin_b", priority=100, group="linear.q4_k.q8_k.f32.b.v1")])
    with pytest.raises(ResolutionError) as exc:
        resolve(req(), reg)
    text = str(exc.value)
    assert "span 2 equivalence groups" in text and "lin_a" in text and "lin_b" in text
    assert "kernelmap explain --op blk.3.attn_q" in exc.value.hint
    rows = exc.value.trace_entry["rows"]
    assert exc.value.trace_entry["selected"] is None
    assert {r["decision"] for r in rows} == {"rejected"}
    assert {r["reason"] for r in rows if "variant" not in r} == {"group_conflict"}


def test_rank_contract_in_request_removes_the_cross_group_fault(tmp_path):
    reg = registry(tmp_path, [make_map("lin_a", priority=900, group="linear.q4_k.q8_k.f32.a.v1"),
                              make_map("lin_b", priority=100, group="linear.q4_k.q8_k.f32.b.v1")])
    res = resolve(req(contract="linear.q4_k.q8_k.f32.b.v1"), reg)
    assert res.provider.id == "lin_b"
    assert by_provider(res.trace_entry)["lin_a"]["reason"] == "contract_mismatch"


def test_rank_refuses_equal_priority_tie_among_allowed_candidates(tmp_path):
    reg = registry(tmp_path, [make_map("lin_a", status="candidate"), make_map("lin_b", status="candidate")])
    with pytest.raises(ResolutionError, match="lin_a, lin_b tie at priority 100"):
        resolve(req(allow_status={"production", "candidate"}), reg)


def test_rank_production_beats_higher_priority_candidate_in_one_group(tmp_path):
    reg = registry(tmp_path, [make_map("lin_a", status="candidate", priority=900), make_map("lin_b", priority=1)])
    res = resolve(req(allow_status={"production", "candidate"}), reg)
    assert res.provider.id == "lin_b"
    rows = by_provider(res.trace_entry)
    assert rows["lin_a"]["decision"] == "ranked" and rows["lin_a"]["rank"] == 1


def test_rank_higher_priority_wins_within_one_group(tmp_path):
    reg = registry(tmp_path, [make_map("lin_a", priority=100), make_map("lin_b", priority=200)])
    assert resolve(req(), reg).provider.id == "lin_b"


@pytest.mark.parametrize(("overrides", "request_kw", "reason", "stage"), [
    ({"status": "diagnostic"}, {}, "status_not_production:diagnostic", "status"),
    ({"phases": ("prefill",)}, {}, "phase_mismatch", "phase"),
    ({}, {"interface": "linear.other.v1"}, "interface_mismatch", "interface"),
    ({}, {"contract": "linear.q8_0.q8_0.f32.v1"}, "contract_mismatch", "contract"),
    ({}, {"ports": {"x": ("q8_0", "row_major")}}, "dtype_mismatch:x", "dtype"),
    ({}, {"ports": {"w": ("q4_k", "row_major")}}, "layout_mismatch:w", "layout"),
    ({}, {"ports": {"bias": ("f32", "row_major")}}, "port_missing:bias", "port"),
    ({}, {"dims": {"K": 1000}}, "constraint_failed:K:multiple", "constraint"),
    ({"constraints": {"M": {"max": 1}}}, {"dims": {"M": 4}}, "constraint_failed:M:max", "constraint"),
    ({"constraints": {"N": {"min": "K / 2"}}}, {"dims": {"N": 100, "K": 1024}}, "constraint_failed:N:min",
     "constraint"),
    ({"constraints": {"N": {"equals": "K"}}}, {"dims": {"N": 100, "K": 1024}}, "constraint_failed:N:equals",
     "constraint"),
    ({}, {"aliases": {("y", "x")}}, "alias_unsafe:y", "alias"),
    ({"may_alias": ("input:x",)}, {"aliases": {("y", "w")}}, "alias_unsafe:y", "alias"),
])
def test_filter_rejects_with_reason_code(tmp_path, overrides, request_kw, reason, stage):
    reg = registry(tmp_path, [make_map("lin_a", **overrides)])
    with pytest.raises(ResolutionError) as exc:
        resolve(req(**request_kw), reg)
    row = by_provider(exc.value.trace_entry)["lin_a"]
    assert (row["reason"], row["stage"], row["decision"]) == (reason, stage, "rejected")
    line = exc.value.line()
    assert line.startswith("blk.3.attn_q: ") and "1 candidate rejected" in line and f"closest lin_a: {reason}" in line


def test_filter_isa_unavailable_when_no_variant_can_run(tmp_path):
    m = make_map("lin_a")
    m["variants"][0]["constraints"] = {"M": {"max": 1}}  # ref only for one row
    reg = registry(tmp_path, [m])
    with pytest.raises(ResolutionError) as exc:
        resolve(req(dims={"M": 8, "N": 640, "K": 1024}, isa=frozenset()), reg)
    rows = exc.value.trace_entry["rows"]
    prov = by_provider(exc.value.trace_entry)["lin_a"]
    assert prov["reason"] == "isa_unavailable:avx2" and prov["stage"] == "isa"
    variant_reasons = {r["variant"]: r["reason"] for r in rows if "variant" in r}
    assert variant_reasons == {"ref": "constraint_failed:M:max", "avx2": "isa_unavailable:avx2",
                               "avx512": "isa_unavailable:avx2"}


def test_filter_alias_declared_may_alias_is_selected(tmp_path):
    reg = registry(tmp_path, [make_map("lin_a", may_alias=("input:x",))])
    assert resolve(req(aliases={("y", "x")}), reg).provider.id == "lin_a"


@pytest.mark.parametrize(("isa", "variant"), [(frozenset(), "ref"), (AVX2, "avx2"), (AVX512, "avx512")])
def test_rank_best_eligible_variant_by_priority(tmp_path, isa, variant):
    reg = registry(tmp_path, [make_map("lin_a")])
    res = resolve(req(isa=isa), reg)
    assert res.variant.name == variant
    rejected = {r["variant"] for r in res.trace_entry["rows"] if r["decision"] == "rejected"}
    assert rejected == {"avx2", "avx512"} - {v.name for v in res.provider.variants if v.requires <= isa}


def test_filter_variant_constraint_rejects_only_that_variant(tmp_path):
    m = make_map("lin_a")
    m["variants"][2]["constraints"] = {"N": {"multiple": 64}}
    reg = registry(tmp_path, [m])
    res = resolve(req(isa=AVX512, dims={"M": 1, "N": 32, "K": 256}), reg)
    assert res.variant.name == "avx2"
    row = next(r for r in res.trace_entry["rows"] if r.get("variant") == "avx512")
    assert row["reason"] == "constraint_failed:N:multiple" and row["decision"] == "rejected"


def test_filter_unnamed_ports_are_reported_unchecked_but_unbound_dims_reject(tmp_path):
    reg = registry(tmp_path, [make_map("lin_a")])
    res = resolve(Request(op="linear", phase="decode", isa=AVX2, dims={"K": 512}), reg)
    detail = by_provider(res.trace_entry)["lin_a"]["detail"]
    assert "port:w" in detail and "constraint" not in detail
    with pytest.raises(ResolutionError) as exc:
        resolve(Request(op="linear", phase="decode", isa=AVX2), reg)
    row = by_provider(exc.value.trace_entry)["lin_a"]
    assert row["reason"] == "constraint_unevaluable:K:multiple", row
    assert "dim K is not given by the request" in row["detail"]


# ---- item 3 of issue 11: constraints never pass unchecked; run-time dims are checked over their range ----

@pytest.mark.parametrize(("bound", "fragment"), [
    ("N / 3", "is not an integer"),
    ("K / (N - N)", "division by zero"),
    ("Z", "dim Z is not bound"),
])
def test_filter_unevaluable_constraint_rejects_with_its_own_reason(tmp_path, bound, fragment):
    m = make_map("lin_a")
    m["dims"].append("Z")
    m["constraints"] = {"K": {"min": bound}}
    reg = registry(tmp_path, [m])
    with pytest.raises(ResolutionError) as exc:
        resolve(req(dims={"M": 1, "N": 640, "K": 1024}), reg)
    row = by_provider(exc.value.trace_entry)["lin_a"]
    assert (row["stage"], row["reason"]) == ("constraint", "constraint_unevaluable:K:min"), row
    assert fragment in row["detail"]
    assert "constraint_unevaluable:K:min" in exc.value.line()


def test_filter_unevaluable_variant_constraint_rejects_only_that_variant(tmp_path):
    m = make_map("lin_a")
    m["variants"][2]["constraints"] = {"N": {"multiple": "K / (M - M)"}}
    reg = registry(tmp_path, [m])
    res = resolve(req(isa=AVX512), reg)
    assert res.variant.name == "avx2"
    row = next(r for r in res.trace_entry["rows"] if r.get("variant") == "avx512")
    assert row["reason"] == "constraint_unevaluable:N:multiple" and "division by zero" in row["detail"]


@pytest.mark.parametrize(("rule", "rows", "selected", "witness"), [
    ({"multiple": 16}, (1, 128), False, "M=1"),
    ({"multiple": 16}, 128, True, None),         # the planning maximum alone would pass
    ({"max": 64}, (1, 128), False, "M=128"),
    ({"max": 64}, 64, True, None),
    ({"min": 1}, (1, 128), True, None),
    ({"min": 2}, (1, 128), False, "M=1"),
    ({"equals": 1}, 1, True, None),              # decode: one row
    ({"equals": 128}, (1, 128), False, "M=1"),
    ({"multiple": 1}, (1, 128), True, None),
])
def test_filter_runtime_rows_are_checked_over_their_whole_range(tmp_path, rule, rows, selected, witness):
    m = make_map("lin_a", phases=("prefill",))
    m["constraints"] = {"M": rule}
    reg = registry(tmp_path, [m])
    request = req(phase="prefill", dims={"M": rows, "N": 640, "K": 1024})
    if selected:
        assert resolve(request, reg).provider.id == "lin_a"
        return
    with pytest.raises(ResolutionError) as exc:
        resolve(request, reg)
    row = by_provider(exc.value.trace_entry)["lin_a"]
    assert row["reason"] == f"constraint_failed:M:{next(iter(rule))}"
    assert f"fails for {witness} (M takes 1..128 at run time)" in row["detail"], row["detail"]


def test_filter_bound_reading_a_runtime_dim_is_checked_for_every_value(tmp_path):
    m = make_map("lin_a", phases=("prefill",))
    m["constraints"] = {"K": {"min": "M * 8"}}      # holds at M=1 .. 128 exactly when K >= 1024
    reg = registry(tmp_path, [m])
    assert resolve(req(phase="prefill", dims={"M": (1, 128), "N": 640, "K": 1024}), reg).provider.id == "lin_a"
    with pytest.raises(ResolutionError) as exc:
        resolve(req(phase="prefill", dims={"M": (1, 128), "N": 640, "K": 1016}), reg)
    assert "K min M * 8 fails for K=1016, M=128" in by_provider(exc.value.trace_entry)["lin_a"]["detail"]


def test_filter_too_many_runtime_combinations_is_unevaluable_not_passed(tmp_path):
    m = make_map("lin_a", phases=("prefill",))
    m["constraints"] = {"K": {"min": "M * N"}}
    reg = registry(tmp_path, [m])
    with pytest.raises(ResolutionError) as exc:
        resolve(req(phase="prefill", dims={"M": (1, 1000), "N": (1, 1000), "K": 1024}), reg)
    row = by_provider(exc.value.trace_entry)["lin_a"]
    assert row["reason"] == "constraint_unevaluable:K:min" and "combinations" in row["detail"]


def test_request_dim_range_round_trips_and_rejects_reversed_range():
    r = req(dims={"M": [1, 128], "N": 640, "K": [7, 7]})
    assert r.dims == {"K": 7, "M": (1, 128), "N": 640}
    assert r.to_dict()["dims"] == {"K": 7, "M": [1, 128], "N": 640}
    assert Request.from_dict(json.loads(json.dumps(r.to_dict()))) == r
    with pytest.raises(RequestError, match="lo <= hi"):
        req(dims={"M": [128, 1]})


def test_resolve_unknown_op_fails_closed_without_fallback(tmp_path):
    reg = registry(tmp_path, [make_map("lin_a")])
    with pytest.raises(ResolutionError, match="no provider implements op rope"):
        resolve(Request(op="rope", phase="decode", label="blk.0.rope_q"), reg)


def test_resolve_closest_candidate_fails_fewest_checks(tmp_path):
    reg = registry(tmp_path, [make_map("aaa", weight="q8_0", act="q8_0", phases=("prefill",)),
                              make_map("zzz", phases=("prefill",), priority=50)])
    with pytest.raises(ResolutionError) as exc:
        resolve(req(), reg)
    assert "2 candidates rejected; closest zzz: phase_mismatch" in exc.value.line()


# ---- determinism: shuffled file order, same result and same trace bytes -------------------------

_POOL = [
    make_map("p_cand_900", status="candidate", priority=900),
    make_map("p_prefill_800", priority=800, phases=("prefill",)),
    make_map("p_q8_700", priority=700, weight="q8_0", act="q8_0"),
    make_map("p_main_100", priority=100),
    make_map("p_low_50", priority=50, phases=("decode",)),
    make_map("p_diag_300", status="diagnostic", priority=300),
    make_map("p_nok_600", priority=600, constraints={"K": {"multiple": 4096}}),
    make_map("p_alias_90", priority=90, may_alias=("input:x",), variants=("ref", "avx2")),
]


def _outcome(reg: Registry, request: Request) -> str:
    try:
        entry = resolve(request, reg).trace_entry
    except ResolutionError as exc:
        entry = exc.trace_entry
    return json.dumps(entry, sort_keys=True)


@settings(max_examples=25, deadline=None)
@given(order=st.permutations(list(range(len(_POOL)))), split=st.integers(0, len(_POOL)),
       phase=st.sampled_from(["prefill", "decode"]), isa=st.sampled_from([frozenset(), AVX2, AVX512]),
       alias=st.booleans())
def test_resolve_shuffled_file_order_gives_same_result_and_trace(order, split, phase, isa, alias):
    request = Request(op="linear", phase=phase, ports=Q4K_PORTS, dims={"M": 2, "N": 64, "K": 512}, isa=isa,
                      aliases={("y", "x")} if alias else frozenset(), label="blk.0.ffn_up")
    with tempfile.TemporaryDirectory() as tmp:
        base, kdir = write_maps(Path(tmp) / "base", _POOL)
        reference = _outcome(load_registry([base], builtin=False, kernel_root=kdir), request)
        shuffled = [_POOL[i] for i in order]
        d1 = Path(tmp) / "one" / "maps"
        d2 = Path(tmp) / "two" / "maps"
        d1.mkdir(parents=True)
        d2.mkdir(parents=True)
        for i, m in enumerate(shuffled):  # creation order and directory split follow the permutation
            ((d1 if i < split else d2) / f"{m['id']}.json").write_text(json.dumps(m, indent=1))
        dirs = [d2, d1] if order[0] % 2 else [d1, d2]
        reg = load_registry(dirs, builtin=False, kernel_root=kdir)
        assert _outcome(reg, request) == reference
        providers = list(reg.providers.values())
        random.Random(order[0]).shuffle(providers)
        assert _outcome(Registry(providers), request) == reference


# ---- requests ---------------------------------------------------------------------------------

def test_request_roundtrip_through_dict_is_identity():
    r = req(aliases={("y", "x")}, contract="linear.q4_k.q8_k.f32.v1", allow_status={"candidate", "production"})
    d = r.to_dict()
    assert Request.from_dict(json.loads(json.dumps(d))).to_dict() == d
    assert d["isa"] == sorted(AVX2) and d["aliases"] == [["y", "x"]]


@pytest.mark.parametrize(("kw", "pointer", "fragment"), [
    ({"phase": "decoding"}, "/phase", "unknown phase"),
    ({"dims": {"K": -1}}, "/dims/K", "non-negative integer"),
    ({"dims": {"K": True}}, "/dims/K", "non-negative integer"),
    ({"ports": {"x": ("q8_k",)}}, "/ports/x", "(dtype, layout)"),
    ({"contract": "Linear Q4"}, "/contract", "malformed contract"),
    ({"allow_status": {"prod"}}, "/allow_status", "unknown status"),
    ({"isa": {"AVX2"}}, "/isa", "malformed isa feature"),
    ({"op": "Linear"}, "/op", "malformed op name"),
])
def test_request_invalid_field_raises_request_error(kw, pointer, fragment):
    with pytest.raises(RequestError) as exc:
        req(**kw)
    assert exc.value.pointer == pointer and fragment in exc.value.line()


def test_request_from_dict_unknown_field_is_refused():
    with pytest.raises(RequestError, match="unknown request field \"phases\""):
        Request.from_dict({"op": "linear", "phases": "decode"})


def test_request_is_immutable():
    r = req()
    with pytest.raises(TypeError):
        r.dims["K"] = 5
    with pytest.raises(AttributeError):
        r.op = "rope"


def test_request_equal_requests_hash_equal():
    a, b = req(), req()
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1
    assert req(phase="prefill") != a


_ANY_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=8),
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=8), c, max_size=3), max_leaves=8)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from(["op", "phase", "contract", "interface", "ports", "dims", "aliases",
                                        "allow_status", "isa", "label", "extra"]), _ANY_JSON, max_size=6))
def test_request_from_random_dict_raises_only_request_error(data):
    try:
        Request.from_dict(data)
    except RequestError as exc:
        assert "\n" not in exc.line()


def _repacked(map_id: str, weight: str = "q5_0", **kw) -> dict:
    m = make_map(map_id, weight=weight, act="q8_0", **kw)
    m["weights"][0]["layout"] = "q32_r8"
    return m


Q50_PORTS = {"x": ("q8_0", "row_major"), "w": ("q5_0", "ggml_blocks"), "y": ("f32", "row_major")}


def test_a_weight_port_in_a_repacked_layout_meets_a_request_for_the_gguf_layout(tmp_path):
    reg = registry(tmp_path, [_repacked("lin_r8", priority=110), make_map("lin_plain", weight="q5_0", act="q8_0")])
    res = resolve(req(ports=Q50_PORTS), reg)
    assert res.provider.id == "lin_r8"  # the packer makes q32_r8 from the GGUF's q5_0 blocks
    assert by_provider(res.trace_entry)["lin_plain"]["decision"] == "ranked"


def test_a_repacked_layout_the_packer_cannot_make_is_a_layout_mismatch(tmp_path):
    reg = registry(tmp_path, [_repacked("lin_r8", weight="q4_k", priority=110)])
    with pytest.raises(ResolutionError) as exc:
        resolve(req(ports={**Q4K_PORTS, "x": ("q8_0", "row_major")}), reg)
    assert by_provider(exc.value.trace_entry)["lin_r8"]["reason"] == "layout_mismatch:w"
    m = make_map("act_r8", weight="q5_0", act="q8_0")  # activations are never repacked
    m["inputs"][0]["layout"] = "q32_r8"
    with pytest.raises(ResolutionError) as exc:
        resolve(req(ports=Q50_PORTS), registry(tmp_path / "b", [m]))
    assert by_provider(exc.value.trace_entry)["act_r8"]["reason"] == "layout_mismatch:x"


def test_rank_puts_a_provider_that_can_run_only_its_ref_after_one_with_a_simd_variant(tmp_path):
    reg = registry(tmp_path, [_repacked("lin_r8", priority=110, variants=("ref", "avx512")),
                              make_map("lin_plain", weight="q5_0", act="q8_0")])
    res = resolve(req(ports=Q50_PORTS), reg)  # AVX2 host: lin_r8 would run its ref
    assert (res.provider.id, res.variant.name) == ("lin_plain", "avx2")
    ranked = by_provider(res.trace_entry)["lin_r8"]
    assert ranked["decision"] == "ranked" and "only its ref runs on this CPU" in ranked["detail"]
    assert resolve(req(ports=Q50_PORTS, isa=AVX512), reg).provider.id == "lin_r8"
    # where every survivor can run only its ref, priority decides as before
    assert resolve(req(ports=Q50_PORTS, isa=frozenset()), reg).provider.id == "lin_r8"
