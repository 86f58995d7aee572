"""The ISA flag table: implications checked against the compilers, and the map loader's flag rules."""

from __future__ import annotations

import copy
import json
import platform
import shutil
import subprocess
from pathlib import Path

import pytest

from kernelmap import isa_flags, target
from kernelmap.codegen.emit import GCC_FEATURES
from kernelmap.errors import MapError
from kernelmap.maps.loader import load_map
from kernelmap.maps.registry import load_registry

CORPUS = Path(__file__).resolve().parent.parent / "errors" / "maps"

# Predefined macros that name an ISA feature, per architecture (Linux /proc/cpuinfo spelling).
X86_MACROS = {
    "__SSE3__": "pni", "__SSSE3__": "ssse3", "__SSE4_1__": "sse4_1", "__SSE4_2__": "sse4_2", "__POPCNT__": "popcnt",
    "__XSAVE__": "xsave", "__AVX__": "avx", "__AVX2__": "avx2", "__FMA__": "fma", "__F16C__": "f16c",
    "__BMI__": "bmi1", "__BMI2__": "bmi2", "__AVX512F__": "avx512f", "__AVX512BW__": "avx512bw",
    "__AVX512VL__": "avx512vl", "__AVX512DQ__": "avx512dq", "__AVX512CD__": "avx512cd",
    "__AVX512VNNI__": "avx512_vnni", "__AVX512BF16__": "avx512_bf16", "__AVX512VBMI__": "avx512vbmi",
    "__AVX512VBMI2__": "avx512_vbmi2", "__AVX512IFMA__": "avx512ifma", "__AVX512BITALG__": "avx512_bitalg",
    "__AVX512VPOPCNTDQ__": "avx512_vpopcntdq", "__AVX512FP16__": "avx512_fp16", "__AVXVNNI__": "avx_vnni",
    "__AMX_TILE__": "amx_tile", "__AMX_INT8__": "amx_int8", "__AMX_BF16__": "amx_bf16",
    # fused multiply-add is fast: FMA3, or AVX-512F's EVEX forms (so avx512f implies fma in the table)
    "__FP_FAST_FMA": "fma", "__FP_FAST_FMAF": "fma", "__FP_FAST_FMAF32": "fma", "__FP_FAST_FMAF32x": "fma",
    "__FP_FAST_FMAF64": "fma",
}
# Macros a flag changes that are not features: part of an already mapped feature (crc32 is SSE4.2),
# or not an ISA extension at all.
X86_NOT_FEATURES = {"__CRC32__", "__BIGGEST_ALIGNMENT__", "__FLT_EVAL_METHOD__", "__FLT_EVAL_METHOD_TS_18661_3__"}
ARM_MACROS = {
    "__ARM_NEON": "asimd", "__ARM_FP": "fp", "__ARM_FEATURE_ATOMICS": "atomics", "__ARM_FEATURE_CRC32": "crc32",
    "__ARM_FEATURE_QRDMX": "asimdrdm", "__ARM_FEATURE_DOTPROD": "asimddp", "__ARM_FEATURE_MATMUL_INT8": "i8mm",
    "__ARM_FEATURE_COMPLEX": "fcma", "__ARM_FEATURE_JCVT": "jscvt", "__ARM_FEATURE_FRINT": "frint",
    "__ARM_FEATURE_BF16_SCALAR_ARITHMETIC": "bf16", "__ARM_FEATURE_BF16_VECTOR_ARITHMETIC": "bf16",
    "__ARM_FEATURE_FP16_SCALAR_ARITHMETIC": "fphp", "__ARM_FEATURE_FP16_VECTOR_ARITHMETIC": "asimdhp",
    "__ARM_FEATURE_SVE": "sve",
}
# __ARM_FEATURE_* macros that add nothing to the features above (or are not ISA extensions).
ARM_NOT_FEATURES = {"__ARM_FEATURE_SVE_BITS", "__ARM_FEATURE_SVE_VECTOR_OPERATORS", "__ARM_FEATURE_CLZ",
                    "__ARM_FEATURE_FMA", "__ARM_FEATURE_IDIV", "__ARM_FEATURE_NUMERIC_MAXMIN",
                    "__ARM_FEATURE_UNALIGNED"}


def _macros(cc: str, *flags: str) -> dict[str, str]:
    out = subprocess.run([cc, *flags, "-dM", "-E", "-"], input="", capture_output=True, text=True, check=True).stdout
    macros = {}
    for line in out.splitlines():
        _, name, *value = line.split(" ", 2)
        macros[name] = value[0] if value else ""
    return macros


def _compiler_features(cc: str, flags: list[str], table: dict[str, str], ignore: set[str],
                       prefix: str) -> set[str]:
    """The features `flags` switch on over the compiler's default, from its predefined macros."""
    base = _macros(cc)
    got = _macros(cc, *flags)
    changed = {m for m in got if m.startswith(prefix) and got.get(m) != base.get(m)}
    unknown = sorted(changed - set(table) - ignore)
    assert not unknown, f"{cc} {' '.join(flags)} defines macros the test cannot name as features: {unknown}"
    return {table[m] for m in changed if m in table}


def _flags(arch: str) -> list[str]:
    return sorted(f for f, e in isa_flags.FLAGS.items() if e.arch == arch)


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64") or shutil.which("gcc") is None,
                    reason="needs gcc targeting x86_64")
@pytest.mark.parametrize("flag", _flags("x86_64"))
def test_isa_table_x86_flag_implies_at_least_what_gcc_enables(flag):
    enabled = _compiler_features("gcc", [flag], X86_MACROS, X86_NOT_FEATURES, "__")
    missing = enabled - isa_flags.implied_by(flag)
    assert not missing, f"gcc {flag} enables {sorted(missing)}, which the ISA flag table does not imply"
    assert set(isa_flags.FLAGS[flag].enables) <= enabled, f"gcc {flag} does not enable what the table names"


ARM_CC = "aarch64-linux-gnu-gcc"


@pytest.mark.skipif(shutil.which(ARM_CC) is None and platform.machine() != "aarch64",
                    reason="needs an aarch64 gcc (native or aarch64-linux-gnu-gcc)")
@pytest.mark.parametrize("flag", _flags("aarch64"))
def test_isa_table_aarch64_march_implies_at_least_what_gcc_enables(flag):
    cc = ARM_CC if shutil.which(ARM_CC) else "gcc"
    defined = {m for m in _macros(cc, flag) if m.startswith("__ARM_FEATURE_") or m in ("__ARM_NEON", "__ARM_FP")}
    unknown = sorted(defined - set(ARM_MACROS) - ARM_NOT_FEATURES)
    assert not unknown, f"{cc} {flag} defines macros the test cannot name as features: {unknown}"
    enabled = {ARM_MACROS[m] for m in defined if m in ARM_MACROS}
    assert {"asimd", "fp"} <= enabled
    missing = enabled - isa_flags.implied_by(flag)
    assert not missing, f"{cc} {flag} enables {sorted(missing)}, which the ISA flag table does not imply"


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64") or shutil.which("gcc") is None,
                    reason="needs gcc targeting x86_64")
def test_isa_table_every_x86_feature_has_a_startup_check_spelling_gcc_accepts(tmp_path):
    src = tmp_path / "checks.c"
    body = "".join(f'    n += __builtin_cpu_supports("{name}") != 0;\n' for name in sorted(set(GCC_FEATURES.values())))
    src.write_text("int km_count(void) {\n    int n = 0;\n" + body + "    return n;\n}\n")
    proc = subprocess.run(["gcc", "-c", "-o", str(tmp_path / "checks.o"), str(src)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert set(GCC_FEATURES) == {f for f, e in isa_flags.FEATURES.items() if e.arch == "x86_64"}


def test_isa_table_is_consistent_and_known_to_the_target():
    for name, feat in isa_flags.FEATURES.items():
        assert set(feat.implies) <= set(isa_flags.FEATURES), name
        assert all(isa_flags.FEATURES[i].arch == feat.arch for i in feat.implies), name
    for flag, entry in isa_flags.FLAGS.items():
        assert entry.arch in isa_flags.ARCHES
        assert all(isa_flags.FEATURES[f].arch == entry.arch for f in (*entry.enables, *entry.also)), flag
        assert not isa_flags.arithmetic_flag(flag), flag
    assert isa_flags.KNOWN_FEATURES <= target.KNOWN_FEATURES
    # Every gated feature (one KERNELMAP_ISA can switch off) is a table feature a variant can be compiled for.
    assert target._GATED_X86 | target._GATED_ARM <= isa_flags.KNOWN_FEATURES


def test_isa_table_implications_follow_the_compilers():
    assert {"avx512f", "avx512bw", "avx512vl", "avx512dq", "avx2", "avx", "fma", "f16c"} <= \
        isa_flags.implied_by("-mavx512fp16")
    assert {"avx512f", "avx2"} <= isa_flags.implied_by("-mavx512vnni")
    assert "avx" in isa_flags.implied_by("-mavx2")
    assert isa_flags.implied_by("-mamx-int8") >= {"amx_int8", "amx_tile"}
    assert isa_flags.implied_by("-march=armv8.2-a+dotprod") >= {"asimd", "asimddp", "fp", "atomics"}
    assert isa_flags.implied_by("-march=armv8.2-a+sve") >= {"asimd", "sve", "fphp", "asimdhp"}
    assert isa_flags.implied_by("-march=armv8.6-a") >= {"asimd", "asimddp", "i8mm", "bf16"}
    assert "i8mm" in isa_flags.implied_by("-march=armv8.2-a+dotprod+i8mm")


def test_variant_features_completes_requires_with_every_implied_feature():
    feats = isa_flags.variant_features(["avx2", "fma", "f16c"], ["-mavx2", "-mfma", "-mf16c"])
    assert feats == {"avx2", "fma", "f16c", "avx", "sse4_2", "sse4_1", "ssse3", "pni", "popcnt", "xsave"}
    assert isa_flags.variant_features([], []) == frozenset()


def test_builtin_maps_startup_check_can_test_every_feature_their_x86_variants_imply():
    registry = load_registry()
    for provider in registry.providers.values():
        for v in provider.variants:
            feats = isa_flags.variant_features(v.requires, v.cflags)
            if all(isa_flags.FEATURES[f].arch == "x86_64" for f in feats):
                assert feats <= set(GCC_FEATURES), (provider.id, v.name, sorted(feats - set(GCC_FEATURES)))


@pytest.mark.parametrize("flag", ["-ffast-math", "-Ofast", "-ffp-contract=fast", "-ffp-contract=on",
                                  "-funsafe-math-optimizations", "-fassociative-math", "-freciprocal-math",
                                  "-ffinite-math-only", "-fno-signed-zeros", "-fno-trapping-math",
                                  "-fno-math-errno", "-fexcess-precision=fast", "-mfpmath=387",
                                  "-mfpmath=sse,387", "-mrecip", "-mrecip=all", "-mdaz-ftz", "-mpc32",
                                  "-mno-80387", "-mlow-precision-sqrt"])
def test_isa_flags_arithmetic_flag_recognises_flags_that_change_results(flag):
    assert isa_flags.arithmetic_flag(flag)


@pytest.mark.parametrize("flag", ["-mavx2", "-mavx512fp16", "-march=armv8.6-a", "-mabi=ms", "-O2", "-fPIC"])
def test_isa_flags_arithmetic_flag_leaves_other_flags(flag):
    assert not isa_flags.arithmetic_flag(flag)


# --- the map loader's variant-flag check -----------------------------------------------------------

def _base() -> dict:
    doc = json.loads((CORPUS / "forbidden_cflag.json").read_text())
    doc["variants"][1]["cflags"] = ["-mavx2", "-mfma", "-mf16c"]
    return doc


def _load(tmp_path: Path, doc: dict) -> None:
    path = tmp_path / f"{doc['id']}.json"
    path.write_text(json.dumps(doc))
    load_map(path)


def _with_variant(cflags: list[str], requires: list[str]) -> dict:
    doc = _base()
    doc["variants"][1]["cflags"] = cflags
    doc["variants"][1]["requires"] = requires
    return doc


@pytest.mark.parametrize("cflags,requires", [
    (["-march=armv8-a"], ["asimd"]),
    (["-march=armv8.2-a+dotprod"], ["asimd", "asimddp"]),
    (["-march=armv8.2-a+dotprod+i8mm"], ["asimd", "asimddp", "i8mm"]),
    (["-march=armv8.6-a"], ["asimd", "asimddp", "i8mm", "bf16"]),
    (["-march=armv8.2-a+sve"], ["asimd", "sve", "fphp", "asimdhp"]),
    (["-mavx512fp16", "-mavx512f", "-mavx512bw", "-mavx512vl", "-mavx512dq", "-mavx2", "-mfma", "-mf16c"],
     ["avx512_fp16", "avx512f", "avx512bw", "avx512vl", "avx512dq", "avx2", "fma", "f16c"]),
    (["-mavx512f"], ["avx512f", "avx2", "fma", "f16c"]),
    (["-mamx-tile", "-mamx-int8"], ["amx_tile", "amx_int8"]),
    (["-mavx2"], ["avx2", "avx"]),  # an incidental implied feature may be listed
])
def test_map_loader_accepts_table_flags_with_complete_requires(tmp_path, cflags, requires):
    _load(tmp_path, _with_variant(cflags, requires))


@pytest.mark.parametrize("cflags,requires,fragment,pointer", [
    (["-mavx2", "-mabi=ms"], ["avx2"], 'unknown cflag "-mabi=ms"', "/variants/1/cflags/1"),
    (["-march=native"], [], 'unknown cflag "-march=native"', "/variants/1/cflags/0"),
    (["-mtune=skylake"], [], 'unknown cflag "-mtune=skylake"', "/variants/1/cflags/0"),
    (["-mcpu=neoverse-n1"], [], 'unknown cflag "-mcpu=neoverse-n1"', "/variants/1/cflags/0"),
    (["-march=armv8.2-a+dotprod+fp16"], ["asimd", "asimddp"], "unknown cflag", "/variants/1/cflags/0"),
    (["-mavx2", "-ffp-contract=fast"], ["avx2"], "changes floating-point arithmetic", "/variants/1/cflags/1"),
    (["-mfpmath=387"], [], "changes floating-point arithmetic", "/variants/1/cflags/0"),
    (["-mavx2", "-march=armv8-a"], ["avx2", "asimd"], "is for aarch64 but the variant's other cflags are for x86_64",
     "/variants/1/cflags/1"),
    (["-march=armv8-a", "-march=armv8.2-a+dotprod"], ["asimd", "asimddp"], "more than one -march cflag",
     "/variants/1/cflags/1"),
    (["-mavx2"], ["avx2", "fma"], "requires fma but its cflags lack -mfma", "/variants/1/cflags"),
    (["-mavx512vnni", "-mavx512f", "-mavx2", "-mfma", "-mf16c"], ["avx512f", "avx2", "fma", "f16c"],
     "compiles with -mavx512vnni but does not require avx512_vnni", "/variants/1/requires"),
    (["-mavx512vnni"], ["avx512_vnni"], "compiles with -mavx512vnni, which implies avx2, but does not require avx2",
     "/variants/1/requires"),
    (["-march=armv8.2-a+sve"], ["asimd", "sve", "fphp"],
     "which implies asimdhp, but does not require asimdhp", "/variants/1/requires"),
    (["-march=armv8.6-a"], ["asimd", "asimddp", "i8mm"], "compiles with -march=armv8.6-a but does not require bf16",
     "/variants/1/requires"),
])
def test_map_loader_refuses_bad_variant_flags_in_one_line(tmp_path, cflags, requires, fragment, pointer):
    with pytest.raises(MapError) as exc:
        _load(tmp_path, _with_variant(cflags, requires))
    line = exc.value.line()
    assert fragment in line and exc.value.pointer == pointer, line
    assert "\n" not in line


def test_map_loader_ref_variant_with_flags_is_still_refused(tmp_path):
    doc = _base()
    ref = copy.deepcopy(doc["variants"][0])
    ref["cflags"], ref["requires"] = ["-mavx2"], ["avx2"]
    doc["variants"][0] = ref
    with pytest.raises(MapError, match="ref variant is the scalar oracle"):
        _load(tmp_path, doc)
