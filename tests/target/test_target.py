"""Tests for kernelmap.target: cpuinfo parsing, ISA levels, forced lower sets, refusals, classes."""

from __future__ import annotations

import pytest

from kernelmap import target
from kernelmap.errors import TargetError

CPUINFO_TWO_CPUS = """processor\t: 0
flags\t\t: fpu sse sse2 avx avx2 fma f16c avx512f
processor\t: 1
flags\t\t: fpu sse sse2 avx avx2 fma f16c
"""


def test_parse_cpuinfo_two_processors_keeps_common_flags():
    assert target._parse_cpuinfo(CPUINFO_TWO_CPUS) == {"fpu", "sse", "sse2", "avx", "avx2", "fma", "f16c"}


def test_parse_cpuinfo_arm_features_line_is_read():
    assert target._parse_cpuinfo("Features\t: fp asimd asimddp\n") == {"fp", "asimd", "asimddp"}


def test_host_features_on_this_machine_is_nonempty_frozenset():
    feats = target.host_features()
    assert isinstance(feats, frozenset) and feats


def test_parse_isa_levels_nest():
    assert target.parse_isa("scalar") == frozenset()
    assert target.parse_isa("avx2") == {"avx2", "fma", "f16c"}
    assert target.parse_isa("avx512") > target.parse_isa("avx2")
    assert target.parse_isa("avx512vnni") == target.parse_isa("avx512") | {"avx512_vnni"}


def test_parse_isa_comma_list_returns_features():
    assert target.parse_isa("avx2, fma,f16c") == {"avx2", "fma", "f16c"}


def test_parse_isa_unknown_name_names_closest():
    with pytest.raises(TargetError) as err:
        target.parse_isa("avx512vnn")
    assert err.value.value == "avx512vnn"
    assert "closest: avx512vnni" in str(err.value)


def test_missing_returns_sorted_absent_features():
    assert target.missing(["fma", "avx512f", "avx2"], {"avx2"}) == ["avx512f", "fma"]


def _fake_host(monkeypatch, flags):
    monkeypatch.setattr(target, "host_features", lambda: frozenset(flags))


def test_target_features_without_env_is_host(monkeypatch):
    _fake_host(monkeypatch, {"sse2", "avx", "avx2", "fma", "f16c", "avx512f"})
    monkeypatch.delenv("KERNELMAP_ISA", raising=False)
    assert target.target_features() == {"sse2", "avx", "avx2", "fma", "f16c", "avx512f"}


def test_target_features_forced_avx2_drops_avx512(monkeypatch):
    _fake_host(monkeypatch, {"sse2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw"})
    monkeypatch.setenv("KERNELMAP_ISA", "avx2")
    assert target.target_features() == {"sse2", "avx", "avx2", "fma", "f16c"}


def test_target_features_forced_scalar_drops_all_vector_features(monkeypatch):
    _fake_host(monkeypatch, {"sse2", "avx", "avx2", "fma", "f16c"})
    monkeypatch.setenv("KERNELMAP_ISA", "scalar")
    assert target.target_features() == {"sse2"}


def test_target_features_forcing_absent_feature_is_refused(monkeypatch):
    _fake_host(monkeypatch, {"sse2", "avx", "avx2", "fma", "f16c"})
    monkeypatch.setenv("KERNELMAP_ISA", "avx512")
    with pytest.raises(TargetError) as err:
        target.target_features()
    assert "avx512f" in str(err.value) and err.value.pointer == "KERNELMAP_ISA"


def test_require_missing_feature_names_variant_and_feature():
    with pytest.raises(TargetError) as err:
        target.require(["avx512f"], "variant km_x__avx512", available={"avx2"})
    assert str(err.value).startswith("variant km_x__avx512 needs avx512f, which this CPU does not have")


def test_require_present_features_passes():
    target.require(["avx2"], "variant km_x__avx2", available={"avx2", "fma"})


@pytest.mark.parametrize(("flags", "machine", "expected"), [
    (set(), "x86_64", "x86_64"),
    ({"sse4_2", "ssse3", "popcnt", "cx16"}, "x86_64", "x86_64_v2"),
    ({"sse4_2", "ssse3", "popcnt", "cx16", "avx", "avx2", "fma", "f16c", "bmi1", "bmi2", "movbe"},
     "x86_64", "x86_64_v3"),
    ({"sse4_2", "ssse3", "popcnt", "cx16", "avx", "avx2", "fma", "f16c", "bmi1", "bmi2", "movbe",
      "avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512cd"}, "x86_64", "x86_64_v4"),
    ({"sse4_2", "ssse3", "popcnt", "cx16", "avx", "avx2", "fma", "f16c", "bmi1", "bmi2", "movbe",
      "avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512cd", "avx512_vnni"}, "x86_64", "x86_64_v4_vnni"),
    ({"fp", "asimd", "asimddp"}, "aarch64", "aarch64_dotprod"),
])
def test_host_class_feature_sets_map_to_lkb_classes(flags, machine, expected):
    assert target.host_class(flags, machine) == expected


def test_host_class_this_machine_is_a_known_class():
    assert target.host_class() in {c[0] for c in target._CLASSES} | {target._machine()}


def test_require_feature_excluded_by_env_says_so(monkeypatch):
    monkeypatch.setattr(target, "host_features", lambda: frozenset({"sse2", "avx", "avx2", "fma", "f16c", "avx512f"}))
    monkeypatch.setenv("KERNELMAP_ISA", "avx2")
    with pytest.raises(TargetError) as err:
        target.require(["avx512f"], "variant km_x__avx512")
    assert "which KERNELMAP_ISA excludes" in str(err.value)


@pytest.mark.parametrize("granted", [True, False])
def test_amx_features_count_only_when_the_os_grants_the_tile_state(monkeypatch, granted):
    flags = frozenset({"avx512f", "avx512_vnni", "amx_tile", "amx_int8", "amx_bf16"})
    monkeypatch.setattr(target, "_machine", lambda: "x86_64")
    monkeypatch.setattr(target, "_tile_state_granted", lambda: granted)
    got = target._without_refused_tiles(flags)
    assert got == (flags if granted else flags - target.AMX_FEATURES)
    assert target._without_refused_tiles(frozenset({"avx2"})) == {"avx2"}  # no AMX flag: nothing asked


def test_tile_state_request_on_this_host_matches_the_generated_programs_check():
    """On a CPU with AMX the compiler's host features keep AMX exactly when this process is granted the tiles."""
    cpu = target._parse_cpuinfo(open("/proc/cpuinfo").read())
    if not cpu & target.AMX_FEATURES:
        pytest.skip("this CPU has no AMX")
    assert bool(target.host_features() & target.AMX_FEATURES) == target._tile_state_granted()
