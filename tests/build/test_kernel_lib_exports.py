"""The kernel library of a selection must export every selected variant's symbol, or the build names the map.

A map may declare a symbol its C source does not define: the unit's prelude declares the prototype, so the source
compiles and the library links, and the model's own link used to fail later with the linker's lines, naming no
map. build_kernel_library now probes the library's exports (build/probe.py) and refuses with the map file and
`/variants/<i>/symbol`.
"""

from __future__ import annotations

import json

import pytest

from kernelmap.build.kernel_lib import build_kernel_library
from kernelmap.errors import BuildError
from kernelmap.maps.registry import MAPS_DIR, load_registry


def test_a_selected_symbol_the_library_does_not_define_is_refused_naming_the_map(tmp_path):
    # rmsnorm_f32 under a new id: its symbols follow km_<id>__<variant>, so no source defines them
    doc = json.loads((MAPS_DIR / "rmsnorm_f32.json").read_text(encoding="utf-8"))
    doc["id"] = "rmsnorm_renamed"
    doc["selection"]["status"] = "candidate"
    for v in doc["variants"]:
        v["symbol"] = f"km_rmsnorm_renamed__{v['name']}"
    doc["numerics"]["reference"] = "km_rmsnorm_renamed__ref"
    ref = next(i for i, v in enumerate(doc["variants"]) if v["name"] == "ref")
    d = tmp_path / "maps"
    d.mkdir()
    (d / "rmsnorm_renamed.json").write_text(json.dumps(doc), encoding="utf-8")
    registry = load_registry((d,))
    with pytest.raises(BuildError) as info:
        build_kernel_library(registry, frozenset(), [("rmsnorm_f32", "ref"), ("rmsnorm_renamed", "ref")])
    err = info.value
    assert err.path == str(d / "rmsnorm_renamed.json") and err.pointer == f"/variants/{ref}/symbol"
    assert err.value == "km_rmsnorm_renamed__ref" and "does not define" in err.message


def test_the_selected_symbols_the_library_defines_build():
    registry = load_registry()
    lib, pairs = build_kernel_library(registry, frozenset(), [("rmsnorm_f32", "ref")])
    assert lib.is_file() and pairs == [("rmsnorm_f32", "ref")]
