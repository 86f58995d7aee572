"""Tests for kernelmap.build.probe and `kernelmap kernels`: the exported kernel table of a built library."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from kernelmap.build.driver import CompileUnit, build_shared
from kernelmap.build.probe import available_kernels, probe_library, unowned_kernels
from kernelmap.cli import main
from kernelmap.errors import BuildError

SRC = """#include <math.h>
#include <stdint.h>
static float km_helper(float v) { return v * 2.0f; }
__attribute__((visibility("hidden"))) void km_hidden__ref(float *y) { y[0] = 0.0f; }
void km_toy_scale__ref(float *y, int64_t n) { for (int64_t i = 0; i < n; i++) y[i] = km_helper(y[i]); }
void km_toy_scale__avx2(float *y, int64_t n) { for (int64_t i = 0; i < n; i++) y[i] = cosf(y[i]); }
void km_orphan__ref(float *y) { y[0] = 1.0f; }
int km_table_size = 3;
"""


@pytest.fixture(scope="module")
def toy_lib(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("probe")
    src = root / "toy.c"
    src.write_text(SRC)
    return build_shared([CompileUnit(src)], name="toy", out_dir=root / "cache")


def _registry(*variants: tuple[str, str, str]) -> SimpleNamespace:
    providers = {}
    for map_id, name, symbol in variants:
        p = providers.setdefault(map_id, SimpleNamespace(id=map_id, variants=[]))
        p.variants.append(SimpleNamespace(name=name, symbol=symbol))
    return SimpleNamespace(providers=providers)


def test_probe_library_lists_only_exported_defined_functions(toy_lib):
    found = probe_library(toy_lib)
    assert {"km_toy_scale__ref", "km_toy_scale__avx2", "km_orphan__ref"} <= found
    assert "km_hidden__ref" not in found  # hidden visibility
    assert "km_helper" not in found  # static
    assert "cosf" not in found  # undefined (imported from libm)
    assert "km_table_size" not in found  # data, not a function


def test_available_kernels_intersects_registry_with_exports(toy_lib):
    reg = _registry(("toy_scale", "ref", "km_toy_scale__ref"), ("toy_scale", "avx2", "km_toy_scale__avx2"),
                    ("toy_scale", "avx512", "km_toy_scale__avx512"))
    assert available_kernels(toy_lib, reg) == {("toy_scale", "ref", "km_toy_scale__ref"),
                                               ("toy_scale", "avx2", "km_toy_scale__avx2")}


def test_unowned_kernels_reports_orphan_symbols(toy_lib):
    reg = _registry(("toy_scale", "ref", "km_toy_scale__ref"), ("toy_scale", "avx2", "km_toy_scale__avx2"))
    assert unowned_kernels(toy_lib, reg) == ["km_orphan__ref"]


def test_probe_library_non_elf_file_raises_build_error(tmp_path):
    bad = tmp_path / "libfake.so"
    bad.write_text("not an elf")
    with pytest.raises(BuildError) as err:
        probe_library(bad)
    assert err.value.path == str(bad) and "ELF" in str(err.value)


def test_probe_library_missing_file_raises_build_error(tmp_path):
    with pytest.raises(BuildError) as err:
        probe_library(tmp_path / "nope.so")
    assert "not found" in str(err.value)


def test_kernels_cli_json_lists_probed_rows(toy_lib, capsys, monkeypatch):
    from kernelmap.bench import providers as prov

    fake = [prov.BenchProvider("toy_scale", "toy", "toy.v1", Path("toy_scale.json"), {}, (
        prov.BenchVariant("ref", "km_toy_scale__ref", "toy.c", (), (), 0),
        prov.BenchVariant("avx512", "km_toy_scale__avx512", "toy.c", (), (), 20)))]
    monkeypatch.setattr(prov, "load_providers", lambda *a, **k: fake)
    assert main(["kernels", str(toy_lib), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["kernels"] == [{"id": "toy_scale", "symbol": "km_toy_scale__ref", "variant": "ref"}]
    assert "km_orphan__ref" in doc["unowned"] and "km_toy_scale__avx2" in doc["unowned"]


def test_kernels_cli_missing_library_exits_1(tmp_path, capsys):
    assert main(["kernels", str(tmp_path / "nope.so")]) == 1
    assert "not found" in capsys.readouterr().err


def test_probe_library_generic_path_matches_fast_path(toy_lib, monkeypatch):
    from kernelmap.build import probe

    fast = probe_library(toy_lib)
    monkeypatch.setattr(probe, "_SYM64", np.dtype([("x", "u1")]))  # entry size mismatch -> generic path
    assert probe_library(toy_lib) == fast
