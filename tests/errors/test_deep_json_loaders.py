"""JSON a user can point kernelmap at is refused in one line when nested too deeply, by every loader.

Python's decoder recurses once per nesting level; 5000 levels raise RecursionError, which escaped these loaders
(the CLI's last resort printed a traceback, exit 3). maps/loader.parse_json refuses deep input before parsing; the
loaders below read their own files (llama.cpp fixtures, the family fixture manifest, LKB files, a build's weights
manifest) and name the file instead.
"""

from __future__ import annotations

import pytest

from kernelmap.errors import KernelmapError

DEEP = "[" * 5000


def _loaders(tmp_path):
    from kernelmap.families.matrix import load_fixtures
    from kernelmap.lkb._io import read_json
    from kernelmap.parity import load_fixture
    from kernelmap.weights.manifest import load_manifest

    (tmp_path / "greedy.json").write_text(DEEP)
    (tmp_path / "manifest.json").write_text(DEEP)
    (tmp_path / "lkb.json").write_text(DEEP)
    (tmp_path / "weights.json").write_text(DEEP)
    return {
        "parity fixture": (lambda: load_fixture(tmp_path, "greedy.json"), tmp_path / "greedy.json"),
        "family manifest": (lambda: load_fixtures(tmp_path), tmp_path / "manifest.json"),
        "lkb file": (lambda: read_json(tmp_path / "lkb.json"), tmp_path / "lkb.json"),
        "weights manifest": (lambda: load_manifest(tmp_path / "weights.json"), tmp_path / "weights.json"),
    }


@pytest.mark.parametrize("which", ["parity fixture", "family manifest", "lkb file", "weights manifest"])
def test_deeply_nested_json_is_refused_naming_the_file(tmp_path, which):
    load, path = _loaders(tmp_path)[which]
    with pytest.raises(KernelmapError) as info:
        load()
    assert info.value.path == str(path) and "nested too deeply" in info.value.message
