"""The provider check: every kernel-map variant is in exactly one family point or is reported residual."""

from __future__ import annotations

import json

from kernelmap.lkb.coverage import MAPS_DIR, check_providers, read_maps
from kernelmap.lkb.metrics import residual
from kernelmap.lkb.registry import load_chain


def test_check_provider_in_no_family_is_residual(lkb_tree):
    chain = load_chain(lkb_tree["classes"])
    check = check_providers(chain, lkb_tree["maps"])
    assert check.assigned == {("lin_f32", "ref"): ("dot.f32", "dot.ref"), ("lin_f32", "avx2"): ("dot.f32", "dot.avx2")}
    assert check.residual == [("lin_q4", "ref"), ("softcap", "ref")]
    assert check.ok
    assert "residual: softcap:ref is in no family point" in check.lines()
    res = residual("base", chain, check)
    assert res["unregistered"] == 2 and res["count"] == 2
    assert {e["provider"] for e in res["entries"]} == {"lin_q4", "softcap"}


def test_check_variant_in_two_points_is_a_conflict(lkb_tree):
    path = lkb_tree["classes"] / "wide" / "KERNEL_FAMILIES.toml"
    path.write_text(path.read_text().replace('variants = ["avx2"]', 'variants = ["avx2", "ref"]'))
    check = check_providers(load_chain(lkb_tree["classes"]), lkb_tree["maps"])
    assert not check.ok
    assert check.conflicts[("lin_f32", "ref")] == ["dot.f32/dot.avx2", "dot.f32/dot.ref"]


def test_check_point_naming_missing_variant_dangles(lkb_tree):
    path = lkb_tree["classes"] / "wide" / "KERNEL_FAMILIES.toml"
    path.write_text(path.read_text().replace('variants = ["avx2"]', 'variants = ["avx2", "avx9"]'))
    check = check_providers(load_chain(lkb_tree["classes"]), lkb_tree["maps"])
    assert check.dangling == [("dot.avx2", "lin_f32", "avx9")] and not check.ok


def test_check_point_on_class_lacking_features_is_unrealizable(lkb_tree):
    path = lkb_tree["classes"] / "wide" / "KERNEL_FAMILIES.toml"
    path.write_text(path.read_text().replace('classes = ["wide"]', 'classes = ["base", "wide"]'))
    check = check_providers(load_chain(lkb_tree["classes"]), lkb_tree["maps"])
    assert check.unrealizable == [("dot.avx2", "base", ["avx2", "fma"])]


def test_real_maps_every_variant_in_one_point_or_residual():
    """Runs against src/kernelmap/kernel_maps/*.json, read directly."""
    chain = load_chain()
    check = check_providers(chain)
    declared = {}
    for path in sorted(MAPS_DIR.glob("*.json")):
        if path.stem.isupper():
            continue
        raw = json.loads(path.read_text())
        for var in raw["variants"]:
            declared[(raw["id"], var["name"])] = var
    assert set(declared) == set(read_maps())
    assert check.ok, check.lines()
    assert set(check.assigned) | set(check.residual) == set(declared)
    assert not set(check.assigned) & set(check.residual)


def test_real_single_class_bucket_holds_vnni_points_only():
    chain = load_chain()
    res = residual("x86_64_v4_vnni", chain, check_providers(chain))
    assert res["single_class"]["count"] >= 1
    assert all(e["point"].endswith(".avx512vnni") for e in res["single_class"]["entries"])
    assert all(not e["point"].endswith(".avx512vnni") for e in res["entries"] if e["point"])


def test_forks_md_lists_every_copy_and_single_class_point():
    """Residual is never silent: each copy point is in FORKS.md with its reason (regenerate with --write-forks)."""
    from kernelmap.lkb.report import FORKS_PATH

    text = FORKS_PATH.read_text()
    chain = load_chain()
    for _cls, _fam, point in chain.all_points():
        if point.how == "copy":
            assert f"| {point.id} |" in text, f"{point.id} missing: run `kernelmap lkb check --write-forks`"
