"""The remembered schema check of map bytes (maps/loader.py's module docstring): a pass is reused for the same
bytes only, a failure is never remembered, semantic checks always run, and `maps validate` checks everything."""

import json

import pytest
from mapgen import make_map, write_maps

from kernelmap.cli import main
from kernelmap.errors import MapError
from kernelmap.maps import load_map, loader


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A fresh build cache and an empty in-process set, so every test starts with nothing remembered."""
    monkeypatch.setenv("KERNELMAP_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(loader, "_SCHEMA_OK", set())
    return tmp_path / "cache" / "maps_schema_ok"


def _walks(monkeypatch) -> list[str]:
    """Count the schema walks: each call of validate_map appends the map's path."""
    seen: list[str] = []
    real = loader.validate_map

    def counting(doc, path):
        seen.append(str(path))
        real(doc, path)

    monkeypatch.setattr(loader, "validate_map", counting)
    return seen


def test_a_pass_is_remembered_in_process_and_on_disk(tmp_path, monkeypatch, cache):
    mdir, kdir = write_maps(tmp_path, [make_map("lin_a")])
    walks = _walks(monkeypatch)
    first = load_map(mdir / "lin_a.json", kernel_root=kdir)
    assert len(walks) == 1 and len(list(cache.rglob("*"))) == 2  # one prefix dir, one marker
    assert load_map(mdir / "lin_a.json", kernel_root=kdir) == first and len(walks) == 1  # this process's set
    monkeypatch.setattr(loader, "_SCHEMA_OK", set())  # a new process: only the marker is left
    assert load_map(mdir / "lin_a.json", kernel_root=kdir) == first and len(walks) == 1
    load_map(mdir / "lin_a.json", kernel_root=kdir, trusted=False)  # untrusted: the walk runs
    assert len(walks) == 2


def test_changed_bytes_are_checked_again_and_a_failure_is_not_remembered(tmp_path, monkeypatch, cache):
    mdir, kdir = write_maps(tmp_path, [make_map("lin_a")])
    path = mdir / "lin_a.json"
    load_map(path, kernel_root=kdir)
    doc = json.loads(path.read_text())
    doc["selection"]["priority"] = "high"  # schema-invalid
    path.write_text(json.dumps(doc))
    walks = _walks(monkeypatch)
    for _ in range(2):
        with pytest.raises(MapError) as exc:
            load_map(path, kernel_root=kdir)
        assert exc.value.pointer == "/selection/priority"
    assert len(walks) == 2 and len(list(cache.rglob("*"))) == 2  # still only the first bytes' marker


def test_semantic_checks_run_on_remembered_bytes(tmp_path, monkeypatch, cache):
    mdir, kdir = write_maps(tmp_path, [make_map("lin_a")])
    load_map(mdir / "lin_a.json", kernel_root=kdir)
    (kdir / "linear" / "lin_a_ref.c").unlink()  # the schema pass is remembered; the source check is not
    with pytest.raises(MapError) as exc:
        load_map(mdir / "lin_a.json", kernel_root=kdir)
    assert exc.value.pointer == "/sources/0"


def test_the_schema_and_its_library_are_part_of_the_digest(monkeypatch, cache):
    data = b'{"id": "x"}'
    base = loader._schema_digest(data)
    assert loader._schema_digest(data + b" ") != base
    monkeypatch.setattr(loader, "_schema_salt", lambda: b"another schema\0another jsonschema")
    assert loader._schema_digest(data) != base
    monkeypatch.setattr(loader, "_schema_salt", lambda: None)  # no jsonschema release to key on: never remembered
    assert loader._schema_digest(data) is None


def test_without_a_release_to_key_on_every_load_is_checked(tmp_path, monkeypatch, cache):
    mdir, kdir = write_maps(tmp_path, [make_map("lin_a")])
    monkeypatch.setattr(loader, "_schema_salt", lambda: None)
    walks = _walks(monkeypatch)
    for _ in range(2):
        load_map(mdir / "lin_a.json", kernel_root=kdir)
    assert len(walks) == 2 and not cache.exists()


def test_maps_validate_checks_every_schema_even_with_a_marker(tmp_path, cache, capsys):
    mdir, kdir = write_maps(tmp_path, [make_map("lin_a")])
    path = mdir / "lin_a.json"
    doc = json.loads(path.read_text())
    doc["selection"]["priority"] = "high"
    path.write_text(json.dumps(doc))
    marker = loader._schema_marker(loader._schema_digest(path.read_bytes()))  # a forged pass for invalid bytes
    marker.parent.mkdir(parents=True)
    marker.touch()
    rc = main(["maps", "validate", "--no-builtin", str(path)])
    assert rc == 1 and "/selection/priority" in capsys.readouterr().err
