"""Evidence envelopes (one class never counts for another), gap lines from step profiles, residual, yield."""

from __future__ import annotations

import pytest

from kernelmap.errors import LKBError
from kernelmap.lkb.coverage import check_providers
from kernelmap.lkb.evidence import envelope, load_measurements
from kernelmap.lkb.metrics import CATEGORIES, _percentages, classify, envelope_status, gap
from kernelmap.lkb.profile import ProfileEntry, load_profile, measure
from kernelmap.lkb.registry import load_chain


def _setup(lkb_tree, rows_text: str):
    chain = load_chain(lkb_tree["classes"])
    check = check_providers(chain, lkb_tree["maps"], lkb_tree["kernels"])
    path = lkb_tree["root"] / "measurements.toml"
    path.write_text(rows_text)
    return chain, check, envelope(load_measurements(path), check.assigned)


def test_evidence_from_one_class_never_counts_on_another(lkb_tree, measurement):
    chain, check, env = _setup(lkb_tree, measurement("wide", "lin_f32", "ref", 1))
    assert env.measured("wide", "dot.f32", "dot.ref", 1)
    assert not env.measured("widest", "dot.f32", "dot.ref", 1)
    assert not env.measured("base", "dot.f32", "dot.ref", 1)
    entry = ProfileEntry("blk0.q", "lin_f32", "ref", 1.0)
    assert classify(entry, 1, "wide", chain, check, env).category == "shared"
    assert classify(entry, 1, "widest", chain, check, env).category == "shared_unmeasured"
    assert classify(entry, 1, "base", chain, check, env).category == "shared_unmeasured"
    assert env.on_class("widest", "dot.f32") == frozenset()


def test_envelope_status_needs_every_realized_point(lkb_tree, measurement):
    rows = measurement("wide", "lin_f32", "ref", 1) + measurement("wide", "lin_f32", "avx2", 1)
    rows += measurement("wide", "lin_f32", "ref", 16)
    chain, _check, env = _setup(lkb_tree, rows)
    status = {e["family"]: e for e in envelope_status("wide", chain, env)}
    assert status["dot.f32"]["inside_rows"] == [1] and status["dot.f32"]["status"] == "partial"
    assert status["dot.f32"]["measured_points"] == ["dot.ref", "dot.avx2"]
    assert envelope_status("widest", chain, env)[0]["status"] == "outside"


def test_gap_parts_add_to_100_and_classify_each_category(lkb_tree, measurement):
    rows = measurement("wide", "lin_f32", "avx2", 1)
    chain, check, env = _setup(lkb_tree, rows)
    entries = [ProfileEntry("a", "lin_f32", "avx2", 3.0),      # shared, measured
               ProfileEntry("b", "lin_f32", "ref", 1.0),       # shared, unmeasured
               ProfileEntry("c", "lin_q4", "ref", 1.0),        # family op, other format: policy variant
               ProfileEntry("d", "softcap", "ref", 1.0),       # no family for the op: novel
               ProfileEntry("e", "nothing", "ref", 1.0)]       # no map at all: novel
    out = gap(entries, 1, "wide", chain, check, env)
    assert out["percent"] == {"shared": 42.8, "shared_unmeasured": 14.3, "parameterisation": 0.0,
                              "policy_variant": 14.3, "novel": 28.6}
    assert sum(out["percent"].values()) == pytest.approx(100.0)
    assert out["line"].startswith("C1: shared 42.8% (measured on this class), shared-unmeasured 14.3%")
    assert out["line"].endswith("novel 28.6% of the step")


def test_gap_copy_point_counts_as_shared_and_uncovered_rows_unmeasured(lkb_tree, measurement, make_copy):
    path = lkb_tree["classes"] / "wide" / "KERNEL_FAMILIES.toml"
    path.write_text(path.read_text().replace('id = "dot.avx2"\n', 'id = "dot.avx2"\nreason = "r"\nevidence = "e"\n'))
    make_copy()
    chain, check, env = _setup(lkb_tree, measurement("wide", "lin_f32", "avx2", 1)
                               + measurement("base", "lin_f32", "ref", 128))
    verdict = classify(ProfileEntry("a", "lin_f32", "avx2", 1.0), 1, "wide", chain, check, env)
    assert verdict.category == "shared" and "LKB residual" in verdict.detail
    uncovered = classify(ProfileEntry("a", "lin_f32", "ref", 1.0), 128, "base", chain, check, env)
    assert uncovered.category == "shared_unmeasured" and uncovered.detail == "no rule of this class covers it"


def test_gap_family_with_format_but_no_point_is_parameterisation(lkb_tree, measurement):
    path = lkb_tree["classes"] / "base" / "KERNEL_FAMILIES.toml"
    path.write_text(path.read_text().replace('formats = ["f32*f32"]', 'formats = ["f32*f32", "q4_0*q8_0"]'))
    chain, check, env = _setup(lkb_tree, "")
    verdict = classify(ProfileEntry("a", "lin_q4", "ref", 1.0), 1, "base", chain, check, env)
    assert verdict.category == "parameterisation"


def test_percentages_always_sum_to_exactly_100():
    for parts in ({"shared": 1.0, "shared_unmeasured": 1.0, "parameterisation": 1.0, "policy_variant": 0.0,
                   "novel": 0.0}, dict.fromkeys(CATEGORIES, 1 / 7)):
        pct = _percentages(parts)
        assert round(sum(pct.values()), 6) == 100.0


def test_profile_malformed_names_file_and_pointer(tmp_path):
    path = tmp_path / "p.json"
    path.write_text('{"schema": "kernelmap.lkb_profile/1", "rows": {"1": [{"op": "a", "provider": "x", '
                    '"variant": "ref", "seconds": -1}]}}')
    with pytest.raises(LKBError) as info:
        load_profile(path)
    assert info.value.path == str(path) and info.value.pointer == "/rows/1/0/seconds"


def test_profile_measure_missing_model_is_one_line_error(tmp_path):
    with pytest.raises(LKBError, match="model file not found") as info:
        measure(tmp_path / "m.gguf", 1)
    assert info.value.path == str(tmp_path / "m.gguf") and "\n" not in info.value.line()


def test_measurements_malformed_row_names_key(tmp_path, measurement):
    path = tmp_path / "m.toml"
    path.write_text(measurement("wide", "lin_f32", "ref", 1).replace('metric = "gbps"', 'metric = "speed"'))
    with pytest.raises(LKBError) as info:
        load_measurements(path)
    assert info.value.pointer == "/measurement/0/metric"


def test_yield_sums_deleted_lines_and_promotions_of_exited_campaigns(tmp_path):
    from kernelmap.lkb.campaign import exit_campaign, start_campaign
    from kernelmap.lkb.metrics import parameterization_yield

    start = {"residual_count": 10, "residual_loc": 900, "residual_copy_points": 10, "residual_single_class": 1}
    start_campaign("a", "x86_64_v3", start, folder=tmp_path)
    end = {**start, "residual_count": 8, "residual_loc": 700}
    _path, lines = exit_campaign("a", end, ["linear.kquant_dot/lanes"], folder=tmp_path)
    assert lines == ["Promoted into the LKB: linear.kquant_dot/lanes",
                     "LKB residual delta: 10 entries, 900 lines -> 8 entries, 700 lines (-2)"]
    start_campaign("b", "x86_64_v3", start, folder=tmp_path)
    got = parameterization_yield(tmp_path)
    assert got == {"lines_deleted": 200, "promoted": ["linear.kquant_dot/lanes"], "campaigns": 2}


def test_campaign_name_must_be_an_identifier(tmp_path):
    from kernelmap.lkb.campaign import start_campaign

    with pytest.raises(LKBError, match="campaign name"):
        start_campaign("../evil", "x86_64", {}, folder=tmp_path)
