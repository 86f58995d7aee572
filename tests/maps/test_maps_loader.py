"""Tests for the map loader and registry: valid maps load; semantic checks and registry faults name files."""

import json
import random
import shutil

import pytest
from mapgen import make_map, write_maps

from kernelmap.errors import MapError
from kernelmap.maps import load_map, load_registry
from kernelmap.maps.loader import SCHEMA_PATH


def test_schema_file_is_draft_2020_12_and_closed():
    schema = json.loads(SCHEMA_PATH.read_text())
    assert schema["$schema"].endswith("2020-12/schema")
    assert schema["additionalProperties"] is False
    assert schema["properties"]["schema"]["const"] == "kernelmap.kernel_map/1"


def test_load_map_valid_synthetic_map_builds_provider(tmp_path):
    mdir, kdir = write_maps(tmp_path, [make_map("lin_a", constraints={"K": {"multiple": 256, "min": "N / 2"}})])
    p = load_map(mdir / "lin_a.json", kernel_root=kdir)
    assert (p.id, p.op, p.status, p.priority, p.group) == ("lin_a", "linear", "production", 100,
                                                          "linear.q4_k.q8_k.f32.v1")
    assert p.phases == frozenset({"prefill", "decode"})
    assert [v.name for v in p.variants] == ["ref", "avx2", "avx512"]
    assert p.reference == "km_lin_a__ref"
    assert [c.text for c in p.constraints] == ["K min N / 2", "K multiple 256"]
    assert p.ports["w"].role == "weight" and p.ports["y"].role == "output"
    assert len(p.sha256) == 64 and p.raw["id"] == "lin_a"


def test_load_map_kernel_abi_doc_example_is_valid(tmp_path):
    text = (SCHEMA_PATH.parents[3] / "docs" / "KERNEL_ABI.md").read_text()
    block = text.split("```json", 1)[1].split("```", 1)[0]
    path = tmp_path / "linear_q4_k_q8_k.json"
    path.write_text(block)
    assert load_map(path).id == "linear_q4_k_q8_k"


def test_load_map_production_without_source_names_the_source(tmp_path):
    mdir, kdir = write_maps(tmp_path, [make_map("lin_a")], sources=False)
    with pytest.raises(MapError) as exc:
        load_map(mdir / "lin_a.json", kernel_root=kdir)
    assert exc.value.pointer == "/sources/0"
    assert exc.value.value == "linear/lin_a_ref.c"


def test_load_map_candidate_without_source_is_allowed(tmp_path):
    mdir, kdir = write_maps(tmp_path, [make_map("lin_a", status="candidate")], sources=False)
    assert load_map(mdir / "lin_a.json", kernel_root=kdir).status == "candidate"


def test_registry_duplicate_id_names_both_files(tmp_path):
    m = make_map("lin_a")
    d1, kdir = write_maps(tmp_path / "one", [m])
    d2, _ = write_maps(tmp_path / "two", [m])
    with pytest.raises(MapError) as exc:
        load_registry([d2, d1], builtin=False, kernel_root=None)
    text = str(exc.value)
    assert "duplicate map id" in text and str(d1 / "lin_a.json") in text and str(d2 / "lin_a.json") in text


def test_registry_equal_priority_production_overlap_is_refused_naming_both_files(tmp_path):
    mdir, kdir = write_maps(tmp_path, [make_map("lin_a"), make_map("lin_b", phases=("decode",))])
    with pytest.raises(MapError) as exc:
        load_registry([mdir], builtin=False, kernel_root=kdir)
    text = str(exc.value)
    assert exc.value.pointer == "/selection/priority"
    assert str(mdir / "lin_a.json") in text and str(mdir / "lin_b.json") in text
    assert "tie at priority 100" in text


@pytest.mark.parametrize("other", [
    {"phases": ("init",)},            # disjoint phases
    {"priority": 90},                 # distinct priority
    {"status": "candidate"},          # not production
    {"group": "linear.other.v1"},     # another group
])
def test_registry_non_overlapping_providers_load(tmp_path, other):
    mdir, kdir = write_maps(tmp_path, [make_map("lin_a"), make_map("lin_b", **other)])
    assert sorted(load_registry([mdir], builtin=False, kernel_root=kdir).providers) == ["lin_a", "lin_b"]


def test_registry_hash_and_order_do_not_depend_on_file_order(tmp_path):
    maps = [make_map(f"lin_{i}", priority=10 * i) for i in range(8)]
    d1, _ = write_maps(tmp_path / "a", maps)
    shuffled = maps[:]
    random.Random(7).shuffle(shuffled)
    d2 = tmp_path / "b" / "maps"
    d2.mkdir(parents=True)
    for m in shuffled:  # different creation order on disk
        (d2 / f"{m['id']}.json").write_text(json.dumps(m, indent=1))
    r1 = load_registry([d1], builtin=False, kernel_root=None)
    r2 = load_registry([d2], builtin=False, kernel_root=None)
    assert r1.hash == r2.hash
    assert list(r1.providers) == sorted(r1.providers) == list(r2.providers)
    assert [p.id for p in r1.by_op("linear")] == [p.id for p in r2.by_op("linear")]


def test_registry_hash_changes_when_a_map_byte_changes(tmp_path):
    mdir, _ = write_maps(tmp_path, [make_map("lin_a")])
    h1 = load_registry([mdir], builtin=False, kernel_root=None).hash
    path = mdir / "lin_a.json"
    path.write_text(path.read_text() + "\n")
    assert load_registry([mdir], builtin=False, kernel_root=None).hash != h1


def test_registry_missing_dir_is_a_map_error(tmp_path):
    with pytest.raises(MapError, match="maps directory not found"):
        load_registry([tmp_path / "nope"], builtin=False)


def test_registry_builtin_maps_all_validate():
    reg = load_registry()
    for p in reg.providers.values():
        assert p.path.stem == p.id


def test_registry_by_op_unknown_op_is_empty(tmp_path):
    mdir, _ = write_maps(tmp_path, [make_map("lin_a")])
    reg = load_registry([mdir], builtin=False, kernel_root=None)
    assert reg.by_op("rope") == () and reg.ops == ("linear",) and "lin_a" in reg and len(reg) == 1


def test_registry_copy_of_dir_gives_same_hash(tmp_path):
    mdir, _ = write_maps(tmp_path / "x", [make_map("lin_a"), make_map("lin_b", priority=5)])
    shutil.copytree(mdir, tmp_path / "copy")
    assert (load_registry([mdir], builtin=False, kernel_root=None).hash
            == load_registry([tmp_path / "copy"], builtin=False, kernel_root=None).hash)
