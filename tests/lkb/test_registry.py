"""Class chain resolution, override by id, and malformed-file errors (one line, file and key)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelmap.errors import LKBError
from kernelmap.lkb.registry import load_chain


def test_chain_child_overrides_family_by_id(lkb_tree):
    chain = load_chain(lkb_tree["classes"])
    base = chain.families("base")["dot.f32"]
    wide = chain.families("wide")["dot.f32"]
    widest = chain.families("widest")["dot.f32"]
    assert base.compute == "scalar_fma" and [p.id for p in base.points] == ["dot.ref"]
    assert wide.compute == "avx2_fma" and [p.id for p in wide.points] == ["dot.ref", "dot.avx2"]
    assert widest.compute == "avx2_fma" and widest.ops == ("linear",)
    assert chain.rules("base")["linear"].rows == (1, 16)
    assert chain.rules("widest")["linear"].rows == (1, 16, 128)


def test_chain_point_override_replaces_by_id(lkb_tree):
    extra = ('\n[[family.point]]\nid = "dot.ref"\nclasses = ["widest"]\n'
             'providers = [{ provider = "lin_f32", variants = ["ref"] }]\n'
             'params = { lanes = 1, weight_format = "f32", reduction = "tree16", accumulator = "f32" }\n')
    (lkb_tree["classes"] / "widest" / "KERNEL_FAMILIES.toml").write_text(
        '[[family]]\nid = "dot.f32"\n' + extra)
    chain = load_chain(lkb_tree["classes"])
    points = {p.id: p for p in chain.families("widest")["dot.f32"].points}
    assert points["dot.ref"].classes == ("widest",)
    assert {p.id: p for p in chain.families("wide")["dot.f32"].points}["dot.ref"].classes == ("base", "wide")


def test_chain_features_accumulate_along_parents(lkb_tree):
    chain = load_chain(lkb_tree["classes"])
    assert chain.features("widest") == {"avx2", "fma", "avx512f"}
    assert chain.classes_having({"avx512f"}) == ["widest"]
    assert [c.name for c in chain.lineage("widest")] == ["base", "wide", "widest"]


def test_chain_unknown_class_names_closest(lkb_tree):
    with pytest.raises(LKBError, match="closest: wide") as info:
        load_chain(lkb_tree["classes"]).families("wdie")
    assert info.value.value == "wdie"


def test_chain_unknown_parent_is_refused(lkb_tree):
    hw = lkb_tree["classes"] / "widest" / "HARDWARE.toml"
    hw.write_text(hw.read_text().replace('parent = "wide"', 'parent = "wdie"'))
    with pytest.raises(LKBError) as info:
        load_chain(lkb_tree["classes"])
    assert info.value.pointer == "/class/parent" and info.value.path == str(hw)


def test_chain_cycle_is_refused(lkb_tree):
    hw = lkb_tree["classes"] / "base" / "HARDWARE.toml"
    hw.write_text(hw.read_text().replace('name = "base"', 'name = "base"\nparent = "widest"'))
    with pytest.raises(LKBError, match="cycle"):
        load_chain(lkb_tree["classes"])


def _one_line(exc: LKBError, path: Path) -> str:
    text = str(exc).split("\nhint:")[0]
    assert "\n" not in text
    assert text.startswith(str(path))
    return text


def test_malformed_toml_syntax_names_file_and_key(lkb_tree):
    path = lkb_tree["classes"] / "wide" / "KERNEL_FAMILIES.toml"
    path.write_text('[[family]]\nid = "dot.f32"\ncompute = avx2_fma\n')
    with pytest.raises(LKBError) as info:
        load_chain(lkb_tree["classes"]).families("wide")
    assert info.value.pointer == "compute"
    assert "malformed TOML" in _one_line(info.value, path)


def test_malformed_point_value_names_file_and_key(lkb_tree):
    path = lkb_tree["classes"] / "wide" / "KERNEL_FAMILIES.toml"
    path.write_text(path.read_text().replace('classes = ["wide"]', 'classes = "wide"'))
    with pytest.raises(LKBError) as info:
        load_chain(lkb_tree["classes"]).families("wide")
    assert info.value.pointer == "/family/0/point/0/classes"
    assert "wide" in _one_line(info.value, path)


def test_point_declaring_how_is_refused_because_how_is_measured(lkb_tree):
    path = lkb_tree["classes"] / "wide" / "KERNEL_FAMILIES.toml"
    path.write_text(path.read_text().replace('id = "dot.avx2"\n', 'id = "dot.avx2"\nhow = "instantiation"\n'))
    with pytest.raises(LKBError, match="measured from its variants' C sources") as info:
        load_chain(lkb_tree["classes"]).families("wide")
    assert info.value.pointer == "point dot.avx2/how"
    _one_line(info.value, path)


def test_malformed_unknown_key_is_refused(lkb_tree):
    path = lkb_tree["classes"] / "base" / "FUSIONS.toml"
    path.write_text(path.read_text() + 'rowz = [1]\n')
    with pytest.raises(LKBError) as info:
        load_chain(lkb_tree["classes"]).rules("base")
    assert "rowz" in _one_line(info.value, path)


def test_malformed_hardware_missing_key(lkb_tree):
    path = lkb_tree["classes"] / "wide" / "HARDWARE.toml"
    path.write_text(path.read_text().replace("vector_bits = 256\n", ""))
    with pytest.raises(LKBError) as info:
        load_chain(lkb_tree["classes"])
    assert info.value.pointer == "/class" and "vector_bits" in _one_line(info.value, path)


def test_family_without_numerics_params_is_refused(lkb_tree):
    path = lkb_tree["classes"] / "base" / "KERNEL_FAMILIES.toml"
    path.write_text(path.read_text().replace('name = "accumulator"\nkind = "numerics"',
                                             'name = "accumulator"\nkind = "compile"'))
    with pytest.raises(LKBError, match="numerics parameter 'accumulator'") as info:
        load_chain(lkb_tree["classes"]).families("base")
    assert info.value.path == str(path)


def test_point_missing_param_value_is_refused(lkb_tree):
    path = lkb_tree["classes"] / "wide" / "KERNEL_FAMILIES.toml"
    path.write_text(path.read_text().replace('reduction = "tree16", ', ""))
    with pytest.raises(LKBError) as info:
        load_chain(lkb_tree["classes"]).families("wide")
    assert info.value.pointer == "point dot.avx2/params/reduction" and info.value.path == str(path)


def test_rule_naming_unknown_family_is_refused(lkb_tree):
    path = lkb_tree["classes"] / "wide" / "FUSIONS.toml"
    path.write_text(path.read_text().replace('family = "dot.f32"', 'family = "dot.f64"'))
    with pytest.raises(LKBError, match="closest: dot.f32"):
        load_chain(lkb_tree["classes"]).rules("wide")


def test_real_chain_every_class_resolves_and_host_class_is_known():
    from kernelmap.target import host_class

    chain = load_chain()
    for name in chain.classes:
        assert chain.families(name)
        for rule in chain.rules(name).values():
            assert rule.family in chain.families(name)
    chain.get(host_class())
    assert [c.name for c in chain.lineage("x86_64_v4_vnni")][-4:] == ["x86_64_v2", "x86_64_v3", "x86_64_v4",
                                                                      "x86_64_v4_vnni"]
    assert [c.name for c in chain.lineage("aarch64_sve")][-3:] == ["aarch64", "aarch64_dotprod", "aarch64_sve"]


def test_real_devices_name_known_classes():
    from kernelmap.lkb.registry import load_devices

    chain = load_chain()
    for dev in load_devices():
        chain.get(dev["class"])


@pytest.mark.parametrize(("machine", "flags"), [
    ("x86_64", ""), ("x86_64", "sse4_2 ssse3 popcnt cx16"),
    ("x86_64", "sse4_2 ssse3 popcnt cx16 avx avx2 fma f16c bmi1 bmi2 movbe"),
    ("x86_64", "sse4_2 ssse3 popcnt cx16 avx avx2 fma f16c bmi1 bmi2 movbe avx512f avx512bw avx512vl avx512dq "
               "avx512cd"),
    ("x86_64", "sse4_2 ssse3 popcnt cx16 avx avx2 fma f16c bmi1 bmi2 movbe avx512f avx512bw avx512vl avx512dq "
               "avx512cd avx512_vnni"),
    ("aarch64", "asimd"), ("aarch64", "asimd asimddp"), ("aarch64", "asimd asimddp sve")])
def test_every_host_class_is_in_the_chain_with_its_features(machine, flags):
    from kernelmap.target import host_class

    chain = load_chain()
    name = host_class(frozenset(flags.split()), machine)
    assert chain.get(name).arch == machine
    gated = {"avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512_vnni", "asimddp", "sve"}
    assert chain.features(name) & gated == set(flags.split()) & gated


def test_host_report_shows_only_the_device_records_that_name_this_cpu(monkeypatch):
    from kernelmap.lkb import report

    records = [{"id": "epyc", "model_name": "AMD EPYC", "class": "c", "cores": 2},
               {"id": "xeon", "model_name": "Intel(R) Xeon(R) Processor", "class": "c", "cores": 2},
               {"id": "other_class", "model_name": "Intel(R) Xeon(R) Processor", "class": "d", "cores": 2}]
    monkeypatch.setattr("kernelmap.target.host_model_name", lambda: "Intel(R) Xeon(R) Processor")
    shown, cpu = report._devices(records, "c", host=True)
    assert [d["id"] for d in shown] == ["xeon"] and cpu == "Intel(R) Xeon(R) Processor"
    # Another class's report (not the host's) lists every record of that class.
    assert [d["id"] for d in report._devices(records, "c", host=False)[0]] == ["epyc", "xeon"]
    monkeypatch.setattr("kernelmap.target.host_model_name", lambda: "AMD Ryzen 9 7950X")
    shown, cpu = report._devices(records, "c", host=True)
    assert shown == []
    lines = report.report_lines({"class": "c", "lineage": ["c"], "profile": "none", "measurement_rows": 0,
                                 "gaps": [], "residual": {"count": 0, "loc": 0, "copy_points": 0,
                                                          "unregistered": 0, "instantiation_points": [],
                                                          "single_class": {"count": 0, "loc": 0}},
                                 "lines_per_class": [], "yield": {"lines_deleted": 0, "promoted": [],
                                                                  "campaigns": 0},
                                 "envelope": [], "provider_check": {"assigned": 0, "variants": 0, "ok": True,
                                                                    "findings": []},
                                 "devices": shown, "cpu_model": cpu, "bandwidth_gbps": {}})
    assert lines[-1].startswith("device: no DEVICES.toml entry names this CPU ('AMD Ryzen 9 7950X'")
