"""aarch64 as a target: `--target` specs, the maps' -march cflags, the generated start-up check, the bundle Makefile."""

from __future__ import annotations

import json

import pytest

from kernelmap.codegen.bundle import _makefile
from kernelmap.codegen.emit import cpu_checks
from kernelmap.errors import CodegenError, MapError, TargetError
from kernelmap.maps import load_map
from kernelmap.target import arch_of, host_class, parse_target

ARM_NEON = ("neon", ["asimd"], ["-march=armv8-a"])
ARM_DOT = ("dotprod", ["asimd", "asimddp"], ["-march=armv8.2-a+dotprod"])


@pytest.mark.parametrize(("spec", "arch", "features", "cls"), [
    ("aarch64", "aarch64", {"fp", "asimd"}, "aarch64"),
    ("aarch64,dotprod", "aarch64", {"fp", "asimd", "asimddp"}, "aarch64_dotprod"),
    ("AArch64, dotprod ,i8mm,sve", "aarch64", {"fp", "asimd", "asimddp", "i8mm", "sve", "fphp", "asimdhp"},
     "aarch64_sve"),
    ("aarch64,asimddp", "aarch64", {"fp", "asimd", "asimddp"}, "aarch64_dotprod"),
    ("x86_64_v3", "x86_64", {"sse4_2", "ssse3", "popcnt", "cx16", "avx", "avx2", "fma", "f16c", "bmi1", "bmi2",
                             "movbe"}, "x86_64_v3"),
    ("x86_64_v4_vnni", "x86_64", None, "x86_64_v4_vnni"),
    ("x86_64", "x86_64", set(), "x86_64"),
])
def test_parse_target_gives_arch_features_and_lkb_class(spec, arch, features, cls, monkeypatch):
    monkeypatch.delenv("CC", raising=False)
    t = parse_target(spec)
    assert t.arch == arch and t.cls == cls
    if features is not None:
        assert t.features == features
    assert t.cc == ("aarch64-linux-gnu-gcc" if arch == "aarch64" else "gcc")


def test_parse_target_cc_comes_from_environment_when_set(monkeypatch):
    monkeypatch.setenv("CC", "clang --target=aarch64-linux-gnu")
    assert parse_target("aarch64").cc == "clang --target=aarch64-linux-gnu"


@pytest.mark.parametrize(("spec", "fragment"), [
    ("aarch64,dotprd", "closest: dotprod"), ("aarch46,dotprod", "closest: aarch64"), ("x86_64_v3,asimd", "'asimd'"),
    ("", "empty target"),
])
def test_parse_target_unknown_word_is_one_line_error_naming_it(spec, fragment):
    with pytest.raises(TargetError) as info:
        parse_target(spec)
    assert fragment in str(info.value) and "\n" not in info.value.line()


def test_target_compiler_env_sets_and_restores_cc(monkeypatch):
    import os

    monkeypatch.setenv("CC", "cc-before")
    t = parse_target("aarch64")
    with t.compiler_env():
        assert os.environ["CC"] == "cc-before"  # $CC overrides the target's compiler
    monkeypatch.delenv("CC")
    t = parse_target("aarch64")
    with t.compiler_env():
        assert os.environ["CC"] == "aarch64-linux-gnu-gcc"
    assert "CC" not in os.environ


def test_arch_of_and_host_class_infer_the_architecture_from_features():
    assert arch_of({"asimd", "asimddp"}) == "aarch64" and arch_of({"avx2"}) == "x86_64"
    assert arch_of(set()) is None and arch_of({"asimd", "avx2"}) is None
    assert host_class({"fp", "asimd", "asimddp"}) == "aarch64_dotprod"  # no machine given: from the features


def _map_with(tmp_path, variant):
    from mapgen import make_map, write_maps

    doc = make_map("lin_arm", variants=("ref",))
    name, req, flags = variant
    doc["variants"].append({"name": name, "symbol": f"km_lin_arm__{name}", "source": f"linear/lin_arm_{name}.c",
                            "requires": req, "cflags": flags, "priority": 40})
    doc["sources"].append(f"linear/lin_arm_{name}.c")
    mdir, kdir = write_maps(tmp_path, [doc])
    return mdir / "lin_arm.json", kdir


@pytest.fixture
def mapgen_path():
    import sys
    from pathlib import Path

    path = str(Path(__file__).resolve().parent.parent / "maps")
    sys.path.insert(0, path)
    yield
    sys.path.remove(path)


@pytest.mark.parametrize("variant", [ARM_NEON, ARM_DOT, ("i8mm", ["asimd", "asimddp", "i8mm"],
                                                          ["-march=armv8.2-a+dotprod+i8mm"]),
                                     ("sve", ["asimd", "sve", "fphp", "asimdhp"], ["-march=armv8.2-a+sve"])])
def test_loader_accepts_the_aarch64_march_flags_with_their_features(tmp_path, mapgen_path, variant):
    path, kdir = _map_with(tmp_path, variant)
    provider = load_map(path, kernel_root=kdir)
    assert provider.variant(variant[0]).requires == frozenset(variant[1])


@pytest.mark.parametrize(("variant", "fragment", "pointer"), [
    (("neon", ["asimd"], ["-march=native"]), 'unknown cflag "-march=native"', "/variants/1/cflags/0"),
    (("neon", ["asimd"], ["-march=armv8.2-a+sve2"]), "unknown cflag \"-march=armv8.2-a+sve2\"",
     "/variants/1/cflags/0"),
    (("neon", [], ["-march=armv8-a"]), "compiles with -march=armv8-a but does not require asimd",
     "/variants/1/requires"),
    (("dotprod", ["asimd", "asimddp"], ["-march=armv8-a"]),
     "requires asimddp but its cflags lack -march=armv8.2-a+dotprod", "/variants/1/cflags"),
    (("dotprod", ["asimd", "asimddp"], ["-march=armv8.2-a+dotprod", "-mavx2"]),
     "is for x86_64 but the variant's other cflags are for aarch64", "/variants/1/cflags/1"),
    (("dotprod", ["asimd", "asimddp"], ["-march=armv8.2-a+dotprod", "-march=armv8-a"]), "more than one -march",
     "/variants/1/cflags/1"),
])
def test_loader_refuses_wrong_aarch64_cflags_naming_the_field(tmp_path, mapgen_path, variant, fragment, pointer):
    path, kdir = _map_with(tmp_path, variant)
    with pytest.raises(MapError) as info:
        load_map(path, kernel_root=kdir)
    assert fragment in str(info.value) and info.value.pointer == pointer


def test_start_up_check_aarch64_reads_hwcap_bits_and_names_the_missing_feature():
    text = cpu_checks({"asimd", "asimddp", "i8mm"})
    assert "#if !defined(__aarch64__)" in text and "getauxval(AT_HWCAP)" in text
    assert "if (!(hwcap & (1UL << 20))) { /* HWCAP_ASIMDDP */" in text
    assert "if (!(hwcap2 & (1UL << 13))) { /* HWCAP2_I8MM */" in text
    assert "this model was compiled for a CPU with asimddp, which this CPU does not have" in text
    assert "__builtin_cpu" not in text


def test_start_up_check_x86_uses_builtin_cpu_supports_and_none_for_portable_builds():
    text = cpu_checks({"avx2", "fma"})
    assert "#if !defined(__x86_64__)" in text and "__builtin_cpu_init();" in text
    assert '__builtin_cpu_supports("avx2")' in text and "getauxval" not in text
    assert cpu_checks(set()) == ""


@pytest.mark.parametrize("features", [{"avx2", "asimd"}, {"asimd", "nonexistent"}])
def test_start_up_check_refuses_mixed_or_untestable_features(features):
    with pytest.raises(CodegenError):
        cpu_checks(features)


def test_bundle_makefile_aarch64_defaults_to_the_cross_compiler_and_keeps_march_flags():
    text = _makefile([("kernels/linear/a_dotprod.c", ["-march=armv8.2-a+dotprod"])], "aarch64")
    assert "ifeq ($(origin CC),default)" in text and "aarch64-linux-gnu-gcc" in text
    assert "-march=armv8.2-a+dotprod -include km_kernels.h" in text
    x86 = _makefile([("kernels/linear/a_avx2.c", ["-mavx2"])], "x86_64")
    assert "CC ?= gcc" in x86 and "aarch64" not in x86


def test_real_maps_aarch64_variants_are_instantiations_with_unique_priorities():
    from kernelmap.lkb.coverage import MAPS_DIR

    for mid in ("linear_q5_0_q8_0_ggml", "linear_q8_0_q8_0_ggml"):
        doc = json.loads((MAPS_DIR / f"{mid}.json").read_text())
        by = {v["name"]: v for v in doc["variants"]}
        assert by["neon"]["cflags"] == ["-march=armv8-a"] and by["neon"]["requires"] == ["asimd"]
        assert by["dotprod"]["cflags"] == ["-march=armv8.2-a+dotprod"]
        assert len({v["priority"] for v in doc["variants"]}) == len(doc["variants"])


def test_isa_levels_neon_and_dotprod_force_lower_aarch64_sets():
    from kernelmap.target import parse_isa

    assert parse_isa("neon") == {"asimd"} and parse_isa("dotprod") == {"asimd", "asimddp"}
