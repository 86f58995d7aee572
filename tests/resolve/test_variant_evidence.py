"""Variant choice from evidence (issue 16 item 5): the class's measurements rank the variants of one
provider where repeated records show a difference beyond their spread; otherwise priority decides.
Variants compute the same bits, so a model's logits never change with the choice."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from synth_model import write_synth_model

from kernelmap.compiler import CompileOptions, compile_model
from kernelmap.lkb.evidence import MIN_RECORDS, VariantEvidence, class_evidence_path, load_variant_evidence
from kernelmap.maps.registry import load_registry
from kernelmap.resolve import Request, resolve
from kernelmap.runtime.model import Model
from kernelmap.target import LEVELS, host_class, target_features


def _toml(rows: list[tuple]) -> str:
    """[[measurement]] tables for (class, provider, variant, rows, threads, shape, median_us) rows."""
    out = []
    for cls, provider, variant, m, threads, shape, us in rows:
        out.append(f'[[measurement]]\nclass = "{cls}"\nprovider = "{provider}"\nvariant = "{variant}"\n'
                   f'rows = {m}\nthreads = {threads}\nshape = "{shape}"\nmetric = "median_us"\nvalue = {us!r}\n'
                   f'machine = "test"\ndate = "2026-01-01"\n')
    return "\n".join(out)


def _records(cls: str, provider: str, timings: dict[str, list[float]], *, rows=(1,), threads=(1, 2),
             shape: str = "640") -> list[tuple]:
    return [(cls, provider, v, m, t, shape, us) for v, values in timings.items() for m in rows for t in threads
            for us in values]


def _evidence(tmp_path: Path, rows: list[tuple], cls: str = "x86_64_v3") -> VariantEvidence:
    path = tmp_path / "measurements.toml"
    path.write_text(_toml(rows))
    return load_variant_evidence(cls, path)


FAST, SLOW = [1.0, 1.1, 1.2], [2.0, 2.1, 2.2]


def test_evidence_picks_the_variant_faster_beyond_the_spread_of_repeated_records(tmp_path):
    ev = _evidence(tmp_path, _records("x86_64_v3", "rmsnorm_f32", {"ref": [9.0, 9.5, 9.9], "avx2": FAST}))
    choice = ev.choose("rmsnorm_f32", ["avx2", "ref"], "640", 1)
    assert choice.winner == "avx2"
    assert "t=1: avx2 1-1.2 us, ref 9-9.9 us" in choice.reason and "measurements.toml" in choice.reason


@pytest.mark.parametrize("timings,why", [
    ({"ref": [1.1, 1.5, 2.0], "avx2": FAST}, "within noise"),  # the ranges overlap
    ({"ref": SLOW[:MIN_RECORDS - 1], "avx2": FAST}, "no evidence"),  # too few records to know the spread
    ({"avx2": FAST}, "no evidence"),  # one variant was never measured
])
def test_evidence_leaves_the_choice_to_priority_when_it_cannot_tell(tmp_path, timings, why):
    ev = _evidence(tmp_path, _records("x86_64_v3", "rmsnorm_f32", timings))
    choice = ev.choose("rmsnorm_f32", ["avx2", "ref"], "640", 1)
    assert choice.winner is None and why in choice.reason


def test_evidence_disagreeing_between_thread_counts_does_not_decide(tmp_path):
    rows = (_records("x86_64_v3", "rmsnorm_f32", {"ref": SLOW, "avx2": FAST}, threads=(1,))
            + _records("x86_64_v3", "rmsnorm_f32", {"ref": FAST, "avx2": SLOW}, threads=(2,)))
    assert _evidence(tmp_path, rows).choose("rmsnorm_f32", ["avx2", "ref"], "640", 1).winner is None


def test_evidence_of_another_class_shape_or_row_count_never_ranks(tmp_path):
    ev = _evidence(tmp_path, _records("x86_64_v4", "rmsnorm_f32", {"ref": SLOW, "avx2": FAST}))
    assert ev.points == {} and ev.choose("rmsnorm_f32", ["avx2", "ref"], "640", 1).winner is None
    ev = _evidence(tmp_path, _records("x86_64_v3", "rmsnorm_f32", {"ref": SLOW, "avx2": FAST}))
    assert ev.choose("rmsnorm_f32", ["avx2", "ref"], "2048", 1).winner is None
    assert ev.choose("rmsnorm_f32", ["avx2", "ref"], "640", 128).winner is None


def _request(isa: frozenset[str]) -> Request:
    return Request(op="rmsnorm", phase="decode", contract="rmsnorm.f32.v1", interface="rmsnorm.row_major.v1",
                   ports={"x": ("f32", "row_major"), "w": ("f32", "contiguous"), "y": ("f32", "row_major")},
                   dims={"M": 1, "N": 640}, isa=isa, label="decode:blk.0.attn_norm")


def test_resolve_ranks_variants_by_evidence_and_the_trace_says_so(tmp_path):
    registry = load_registry(())
    isa = frozenset(LEVELS["avx2"])
    static = resolve(_request(isa), registry)
    assert static.variant.name == "avx2"  # priority: avx2 over ref
    ev = _evidence(tmp_path, _records("x86_64_v3", "rmsnorm_f32", {"ref": FAST, "avx2": SLOW}))
    res = resolve(_request(isa), registry, ev)
    assert (res.provider.id, res.variant.name) == ("rmsnorm_f32", "ref")
    selected = next(r for r in res.rows if r["decision"] == "selected")
    assert selected["variant"] == "ref" and selected["variant_by"] == "evidence"
    assert "variant by evidence" in selected["detail"] and "640 M=1" in selected["evidence"]
    ranked = next(r for r in res.rows if r["stage"] == "variant_rank")
    assert (ranked["variant"], ranked["detail"]) == ("avx2", "slower by evidence")
    noisy = _evidence(tmp_path, _records("x86_64_v3", "rmsnorm_f32", {"ref": [1.0, 1.5, 2.1], "avx2": SLOW}))
    res = resolve(_request(isa), registry, noisy)
    selected = next(r for r in res.rows if r["decision"] == "selected")
    assert res.variant.name == "avx2" and selected["variant_by"] == "priority"
    assert selected["evidence"].startswith("within noise")


def test_committed_evidence_files_parse_and_name_their_own_class():
    files = sorted(class_evidence_path("x").parent.parent.glob("*/measurements.toml"))
    assert files, "no committed evidence (lkb/classes/<class>/measurements.toml)"
    for path in files:
        cls = path.parent.name
        ev = load_variant_evidence(cls, path)
        text = path.read_text()
        assert text.count("[[measurement]]") > 0 and ev.source.endswith(f"classes/{cls}/measurements.toml")
        assert f'class = "{cls}"' in text and all(k[4] >= 1 for k in ev.points)


@pytest.fixture(scope="module")
def wide_synth(tmp_path_factory):
    """A synthetic model 640 wide, so its plain rmsnorm ops have a bench shape ("640")."""
    return write_synth_model(tmp_path_factory.mktemp("ev_synth") / "wide.gguf", d=640, weight_type="q8_0")


def test_model_logits_are_bitwise_the_same_whichever_variant_evidence_picks(wide_synth, tmp_path):
    isa = target_features()
    cls = host_class(isa)
    if not {"avx2", "fma", "f16c"} <= isa:
        pytest.skip("needs a CPU with the avx2 variants")
    registry = load_registry(())
    ranked = [v.name for v in registry.providers["rmsnorm_f32"].ranked_variants if v.requires <= isa]
    loser = ranked[-1]  # the lowest priority (ref): evidence makes it the fastest
    timings = {v: (FAST if v == loser else SLOW) for v in ranked}
    path = tmp_path / "measurements.toml"
    path.write_text(_toml(_records(cls, "rmsnorm_f32", timings, rows=(1, 8))))
    opts = CompileOptions(max_rows=8, evidence="none")
    plain = compile_model(wide_synth, opts)
    by_evidence = compile_model(wide_synth, CompileOptions(max_rows=8, evidence=str(path)))
    chosen = {tuple(s[2:4]) for s in by_evidence.info["selection"] if s[2] == "rmsnorm_f32"}
    assert chosen == {("rmsnorm_f32", loser)}, "evidence did not rank the variants"
    assert {tuple(s[2:4]) for s in plain.info["selection"] if s[2] == "rmsnorm_f32"} == {("rmsnorm_f32", ranked[0])}
    trace = json.loads((by_evidence.build_dir / "selection_trace.json").read_text())
    rows = [r for e in trace["entries"] for r in e["rows"]
            if r["provider"] == "rmsnorm_f32" and r["decision"] == "selected"]
    assert rows and all(r["variant_by"] == "evidence" for r in rows)
    import io

    from kernelmap.cli.explain_cmd import render_trace
    from kernelmap.resolve import SelectionTrace

    shown = io.StringIO()
    render_trace(SelectionTrace.load(by_evidence.build_dir / "selection_trace.json"), file=shown)
    assert f"{loser} (by evidence)" in shown.getvalue()
    prompt = [2, *range(270, 285)]
    out = []
    for compiled in (plain, by_evidence):
        m = Model(compiled, n_ctx=64, threads=2)
        try:
            first = m.prefill(prompt).copy()
            out.append([first, m.decode(int(np.argmax(first))).copy()])
        finally:
            m.close()
    for a, b in zip(*out, strict=True):
        assert np.array_equal(a.view(np.uint32), b.view(np.uint32))


def test_kernel_library_holds_a_variant_only_when_evidence_chooses_it(tmp_path):
    from kernelmap.build.kernel_lib import selectable_variants
    from kernelmap.numerics.policy import load_policy

    registry, policy = load_registry(()), load_policy("llama-cpu")
    isa, allow = frozenset(LEVELS["avx2"]), frozenset({"production"})
    plain = set(selectable_variants(registry, policy, isa, "x86_64_v3", allow))
    assert ("rmsnorm_f32", "avx2") in plain and ("rmsnorm_f32", "ref") not in plain
    noisy = _evidence(tmp_path, _records("x86_64_v3", "rmsnorm_f32", {"ref": [1.0, 1.5, 2.1], "avx2": SLOW}))
    assert set(selectable_variants(registry, policy, isa, "x86_64_v3", allow, noisy)) == plain
    ev = _evidence(tmp_path, _records("x86_64_v3", "rmsnorm_f32", {"ref": FAST, "avx2": SLOW}))
    assert set(selectable_variants(registry, policy, isa, "x86_64_v3", allow, ev)) == plain | {("rmsnorm_f32", "ref")}
