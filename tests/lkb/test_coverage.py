"""The provider check: every kernel-map variant is in exactly one family point or is reported residual."""

from __future__ import annotations

import json

from kernelmap.lkb.coverage import MAPS_DIR, check_providers, read_maps
from kernelmap.lkb.metrics import residual
from kernelmap.lkb.registry import load_chain


def test_check_provider_in_no_family_is_residual(lkb_tree):
    chain = load_chain(lkb_tree["classes"])
    check = check_providers(chain, lkb_tree["maps"], lkb_tree["kernels"])
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
    check = check_providers(load_chain(lkb_tree["classes"]), lkb_tree["maps"], lkb_tree["kernels"])
    assert not check.ok
    assert check.conflicts[("lin_f32", "ref")] == ["dot.f32/dot.avx2", "dot.f32/dot.ref"]


def test_check_point_naming_missing_variant_dangles(lkb_tree):
    path = lkb_tree["classes"] / "wide" / "KERNEL_FAMILIES.toml"
    path.write_text(path.read_text().replace('variants = ["avx2"]', 'variants = ["avx2", "avx9"]'))
    check = check_providers(load_chain(lkb_tree["classes"]), lkb_tree["maps"], lkb_tree["kernels"])
    assert check.dangling == [("dot.avx2", "lin_f32", "avx9")] and not check.ok


def test_check_point_on_class_lacking_features_is_unrealizable(lkb_tree):
    path = lkb_tree["classes"] / "wide" / "KERNEL_FAMILIES.toml"
    path.write_text(path.read_text().replace('classes = ["wide"]', 'classes = ["base", "wide"]'))
    check = check_providers(load_chain(lkb_tree["classes"]), lkb_tree["maps"], lkb_tree["kernels"])
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
    check = check_providers(chain)
    for _cls, _fam, point in chain.all_points():
        if check.how[point.id] == "copy":
            assert f"| {point.id} |" in text, f"{point.id} missing: run `kernelmap lkb check --write-forks`"


def test_check_copy_point_without_reason_and_evidence_is_unjustified(lkb_tree, make_copy):
    make_copy()
    check = check_providers(load_chain(lkb_tree["classes"]), lkb_tree["maps"], lkb_tree["kernels"])
    assert check.how["dot.avx2"] == "copy" and check.unjustified == ["dot.avx2"] and not check.ok
    assert ("unjustified: point dot.avx2 is a copy (measured from its sources) but records no reason and evidence"
            in check.lines())


def test_check_instantiation_point_with_a_copy_reason_is_stale(lkb_tree):
    path = lkb_tree["classes"] / "wide" / "KERNEL_FAMILIES.toml"
    path.write_text(path.read_text().replace('id = "dot.avx2"\n', 'id = "dot.avx2"\nreason = "hand copy"\n'))
    check = check_providers(load_chain(lkb_tree["classes"]), lkb_tree["maps"], lkb_tree["kernels"])
    assert check.how == {"dot.ref": "reference", "dot.avx2": "instantiation"}
    assert check.stale == [("dot.avx2", "instantiation")] and not check.ok


def test_residual_is_measured_copying_a_body_into_a_variant_makes_it_residual(lkb_tree, make_copy):
    """The residual follows the code: the same TOML gives 0 copy points for the instantiation and 1 once
    the variant file is rewritten as a copy (nothing else changed but the reason/evidence it then needs)."""
    chain = load_chain(lkb_tree["classes"])
    before = residual("wide", chain, check_providers(chain, lkb_tree["maps"], lkb_tree["kernels"]))
    assert before["copy_points"] == 0 and before["instantiation_points"] == ["dot.avx2"]
    make_copy()
    after = residual("wide", chain, check_providers(chain, lkb_tree["maps"], lkb_tree["kernels"]))
    assert after["copy_points"] == 1 and after["entries"][0]["point"] == "dot.avx2"
    assert after["loc"] - before["loc"] == len((lkb_tree["kernels"] / "x" / "lin_f32_avx2.c").read_text().splitlines())


def test_lines_per_class_counts_lanes_and_instantiations_a_class_added(lkb_tree):
    from kernelmap.lkb.metrics import lines_per_class

    chain = load_chain(lkb_tree["classes"])
    rows = {r["class"]: r for r in lines_per_class(chain, check_providers(chain, lkb_tree["maps"], lkb_tree["kernels"]))}
    wide = rows["wide"]
    assert wide["added"]["lanes"]["files"] == {"common/km_lanes_toy.h": 2}
    assert wide["added"]["instantiations"]["files"] == {"x/lin_f32_avx2.c": 7}
    assert wide["added_total"] == 9 and wide["lines"]["bodies"]["files"] == {"x/dot_body.h": 4}
    assert rows["widest"]["added_total"] == 0 and rows["base"]["added_total"] == 0


def test_real_aarch64_classes_added_only_lanes_and_instantiation_files():
    """aarch64 arrives by its lanes header and the instantiation files of the family bodies; dotprod by
    its instantiation files (same lanes header, built with +dotprod); neither holds a copy."""
    from kernelmap.lkb.coverage import KERNEL_ROOT
    from kernelmap.lkb.metrics import lines_per_class

    chain = load_chain()
    check = check_providers(chain)
    rows = {r["class"]: r for r in lines_per_class(chain, check)}
    neon, dot = rows["aarch64"]["added"], rows["aarch64_dotprod"]["added"]
    assert neon["lanes"]["files"] == {"common/km_lanes_neon.h": len((KERNEL_ROOT / "common/km_lanes_neon.h")
                                                                   .read_text().splitlines())}
    assert {"linear/q5_0_q8_0_ggml_neon.c", "linear/q8_0_q8_0_ggml_neon.c"} <= set(neon["instantiations"]["files"])
    assert {"linear/q5_0_q8_0_ggml_dotprod.c", "linear/q8_0_q8_0_ggml_dotprod.c"} <= set(dot["instantiations"]["files"])
    assert dot["lanes"]["files"] == {} and neon["copies"]["files"] == {} and dot["copies"]["files"] == {}
    for mid in ("linear_q5_0_q8_0_ggml", "linear_q8_0_q8_0_ggml"):
        for variant in ("avx2", "avx512", "avx512vnni", "neon", "dotprod"):
            assert check.shapes[(mid, variant)].how == "instantiation", check.shapes[(mid, variant)].why
