"""The promotion rule: two users, byte-identical outputs at every point, no microbench regression."""

from __future__ import annotations

import pytest

from kernelmap.errors import LKBError
from kernelmap.lkb.coverage import read_maps
from kernelmap.lkb.evidence import load_measurements
from kernelmap.lkb.promote import noise_band, promote_check, run_variants
from kernelmap.lkb.registry import load_chain
from kernelmap.target import target_features


def _rows(tmp_path, text):
    path = tmp_path / "m.toml"
    path.write_text(text)
    return load_measurements(path)


def test_promote_one_point_is_a_specialization(lkb_tree):
    report = promote_check(load_chain(lkb_tree["classes"]), ["dot.avx2"], [], features=frozenset(),
                           maps_dir=lkb_tree["maps"], run=False)
    assert report.checks["users"]["verdict"] == "fail" and not report.promote


def test_promote_different_numerics_points_fail_by_construction(lkb_tree):
    path = lkb_tree["classes"] / "wide" / "KERNEL_FAMILIES.toml"
    path.write_text(path.read_text().replace('lanes = 8, weight_format = "f32", reduction = "tree16"',
                                             'lanes = 8, weight_format = "f32", reduction = "tree8"'))
    report = promote_check(load_chain(lkb_tree["classes"]), ["dot.avx2", "dot.ref"], [], features=frozenset(),
                           maps_dir=lkb_tree["maps"], run=False)
    assert report.checks["users"]["verdict"] == "pass"
    assert report.checks["byte_identical"]["verdict"] == "fail"


def test_promote_regression_beyond_noise_band_fails(lkb_tree, tmp_path, measurement):
    rows = _rows(tmp_path, measurement("wide", "lin_f32", "avx2", 1, 8.0) + measurement("wide", "lin_f32", "ref", 1, 10.0))
    chain = load_chain(lkb_tree["classes"])
    bad = promote_check(chain, ["dot.avx2", "dot.ref"], rows, features=frozenset(), maps_dir=lkb_tree["maps"],
                        run=False)
    assert bad.checks["no_regression"]["verdict"] == "fail"
    assert "20.0% worse" in bad.checks["no_regression"]["detail"]
    ok = promote_check(chain, ["dot.avx2", "dot.ref"], rows, features=frozenset(), maps_dir=lkb_tree["maps"],
                       noise=0.25, run=False)
    assert ok.checks["no_regression"]["verdict"] == "pass"


def test_promote_without_comparable_records_is_blocked(lkb_tree, tmp_path, measurement):
    rows = _rows(tmp_path, measurement("wide", "lin_f32", "avx2", 1) + measurement("widest", "lin_f32", "ref", 1))
    report = promote_check(load_chain(lkb_tree["classes"]), ["dot.avx2", "dot.ref"], rows, features=frozenset(),
                           maps_dir=lkb_tree["maps"], run=False)
    assert report.checks["no_regression"]["verdict"] == "blocked"


def test_noise_band_reads_spread_of_repeated_records(tmp_path, measurement):
    rows = _rows(tmp_path, measurement("w", "p", "v", 1, 10.0) + measurement("w", "p", "v", 1, 11.0))
    band, how = noise_band(rows)
    assert band == pytest.approx(1.0 / 10.5) and "repeated" in how
    assert noise_band([])[0] == 0.05


def test_promote_unknown_point_and_mixed_families_refused(lkb_tree):
    chain = load_chain()
    with pytest.raises(LKBError, match="closest"):
        promote_check(chain, ["linear_q4_k_q8_k.avx3"], [], features=frozenset(), run=False)
    with pytest.raises(LKBError, match="one family"):
        promote_check(chain, ["linear_q4_k_q8_k.avx2", "rmsnorm_f32.avx2"], [], features=frozenset(), run=False)


def _runnable(provider: str, names: list[str]) -> None:
    declared = read_maps()
    feats = target_features()
    for name in names:
        var = declared.get((provider, name))
        assert var is not None, f"{provider}:{name} has no kernel map"
        if not var.requires <= feats:
            pytest.skip(f"{provider} [{name}]: host lacks {', '.join(sorted(var.requires - feats))}")


@pytest.mark.parametrize("provider", ["linear_q4_k_q8_k", "linear_q8_0_q8_0"])
def test_numerics_point_shared_by_two_classes_gives_identical_bytes(provider):
    """The avx2 point (class x86_64_v3) and the avx512 point (x86_64_v4) share one numerics point."""
    chain = load_chain()
    fam = next(f for f in chain.families("x86_64_v4").values()
               if any(p.id == f"{provider}.avx2" for p in f.points))
    points = {p.id: p for p in fam.points}
    a, b = points[f"{provider}.avx2"], points[f"{provider}.avx512"]
    assert set(a.classes) != set(b.classes)
    assert fam.numerics(a) == fam.numerics(b)
    _runnable(provider, ["avx2", "avx512"])
    for rows in (1, 16):
        out = run_variants(provider, ["avx2", "avx512"], rows)
        assert out["avx2"] == out["avx512"], f"{provider} C{rows}: avx2 and avx512 bytes differ"
        assert len(out["avx2"]) > 0
