"""`kernelmap compile -o DIR` / write_bundle: DIR is replaced only when new, empty or a previous bundle holding
nothing else; anything else (user files, the input model) is refused with one line and left untouched."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from synth_model import write_synth_model

from kernelmap.cli import main
from kernelmap.codegen import bundle
from kernelmap.codegen.bundle import MARKER, write_bundle
from kernelmap.compiler import CompileOptions, compile_model
from kernelmap.errors import ModelError


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    gguf = write_synth_model(tmp_path_factory.mktemp("model") / "m.gguf")
    return compile_model(gguf, CompileOptions(max_rows=8))


def _snapshot(root: Path) -> dict[str, bytes | None]:
    """Every path under root (and root's siblings' names) with a file's bytes, None for a directory."""
    tree: dict[str, bytes | None] = {f"../{p.name}": None for p in root.parent.iterdir()}
    for p in sorted(root.rglob("*")):
        tree[p.relative_to(root).as_posix()] = None if p.is_dir() else p.read_bytes()
    return tree


def _refused(compiled, out: Path) -> ModelError:
    before = _snapshot(out)
    with pytest.raises(ModelError) as err:
        write_bundle(compiled, out)
    assert _snapshot(out) == before  # nothing written, renamed or removed, no temp dir beside it
    line = err.value.line()
    assert "\n" not in line and line.startswith(f"{out.resolve()}: --out: ")
    assert err.value.pointer == "--out"
    return err.value


def test_write_bundle_refuses_a_foreign_directory_and_leaves_it_identical(compiled, tmp_path):
    out = tmp_path / "victim"
    (out / "important").mkdir(parents=True)
    (out / "important" / "thesis.txt").write_text("thesis\n")
    (out / "zz.txt").write_text("notes\n")
    err = _refused(compiled, out)
    assert "not a kernelmap bundle" in err.message
    assert err.value == "important/"  # the first entry in the way


def test_compile_cli_refuses_the_current_directory_holding_user_files(compiled, tmp_path, monkeypatch, capsys):
    out = tmp_path / "victim"
    (out / "important").mkdir(parents=True)
    (out / "important" / "thesis.txt").write_text("thesis\n")
    before = _snapshot(out)
    monkeypatch.chdir(out)
    rc = main(["compile", "-m", str(compiled.gguf), "-o", ".", "-q", "-ub", "8"])
    err = capsys.readouterr().err
    assert rc == 1, err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 2 and lines[1].startswith("hint: "), err
    assert lines[0].startswith(f"error: {out.resolve()}: --out: ") and '"important/"' in lines[0], err
    assert _snapshot(out) == before


@pytest.mark.parametrize("where", ["m.gguf", "sub/m.gguf"])
def test_write_bundle_refuses_a_directory_holding_the_input_model(tmp_path, where):
    out = tmp_path / "mdir"
    gguf = out / where
    gguf.parent.mkdir(parents=True)
    write_synth_model(gguf)
    data = gguf.read_bytes()
    err = _refused(compile_model(gguf, CompileOptions(max_rows=8)), out)
    assert "holds the input model" in err.message and err.value == where
    assert gguf.read_bytes() == data


def test_write_bundle_refuses_a_previous_bundle_made_from_its_own_model_gguf(compiled, tmp_path):
    out = write_bundle(compiled, tmp_path / "bundle")
    gguf = out / "model.gguf"
    data = gguf.read_bytes()
    err = _refused(compile_model(gguf, CompileOptions(max_rows=8)), out)
    assert "holds the input model" in err.message and err.value == "model.gguf"
    assert gguf.read_bytes() == data


def test_write_bundle_refuses_an_existing_file(compiled, tmp_path):
    out = tmp_path / "file"
    out.write_text("keep\n")
    with pytest.raises(ModelError, match="exists and is not a directory"):
        write_bundle(compiled, out)
    assert out.read_text() == "keep\n"


@pytest.mark.parametrize("name", ["new/bundle", "empty"])
def test_write_bundle_writes_a_new_or_empty_directory(compiled, tmp_path, name):
    (tmp_path / "empty").mkdir()
    out = write_bundle(compiled, tmp_path / name)
    assert (out / "Makefile").is_file() and (out / "model.gguf").is_file()
    assert (out / MARKER).read_text().splitlines()[0] == "kernelmap bundle 1"
    assert [p.name for p in out.parent.iterdir() if p.name.startswith(".")] == []


def _make_products(out: Path) -> None:
    """What `make` leaves in a bundle, without running it."""
    (out / "obj").mkdir()
    for name in ("obj/k0.o", "obj/km_runtime.o", "obj/model.o", "obj/main.o", "libkmmodel.so", "model"):
        (out / name).write_bytes(b"built")


def test_write_bundle_replaces_a_previous_built_bundle(compiled, tmp_path):
    out = write_bundle(compiled, tmp_path / "bundle")
    _make_products(out)
    (out / "model.c").write_text("stale")
    write_bundle(compiled, out)
    assert (out / "model.c").read_bytes() == (compiled.build_dir / "gen" / "model.c").read_bytes()
    assert not (out / "obj").exists() and not (out / "model").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bundle"]  # no temp or displaced dir left


def test_write_bundle_keeps_the_previous_bundle_when_the_new_one_fails(compiled, tmp_path, monkeypatch):
    out = write_bundle(compiled, tmp_path / "bundle")
    _make_products(out)
    before = _snapshot(out)

    def broken(root: Path, n_units: int) -> str:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(bundle, "_marker_text", broken)
    with pytest.raises(ModelError, match="cannot write the bundle: No space left on device"):
        write_bundle(compiled, out)
    assert _snapshot(out) == before


def test_write_bundle_swaps_a_previous_bundle_by_rename(compiled, tmp_path, monkeypatch):
    out = write_bundle(compiled, tmp_path / "bundle")
    calls = []
    real = os.replace

    def spy(src, dst):
        calls.append((Path(src).name, Path(dst).name))
        real(src, dst)

    monkeypatch.setattr(bundle.os, "replace", spy)
    write_bundle(compiled, out)
    assert len(calls) == 2 and calls[0][0] == "bundle" and calls[1][1] == "bundle", calls
    assert calls[0][1].startswith(".bundle.old.") and calls[1][0].startswith(".bundle.")


@pytest.mark.parametrize(("extra", "found"), [
    ("notes.txt", "notes.txt"),
    ("kernels/common/mine.h", "kernels/common/mine.h"),
    ("obj/extra.o", "obj/extra.o"),
    ("data/x.bin", "data/"),
    ("model.gguf.bak", "model.gguf.bak"),
])
def test_write_bundle_refuses_a_previous_bundle_with_a_user_file(compiled, tmp_path, extra, found):
    out = write_bundle(compiled, tmp_path / "bundle")
    (out / extra).parent.mkdir(parents=True, exist_ok=True)
    (out / extra).write_text("mine\n")
    err = _refused(compiled, out)
    assert "files that are not the bundle's" in err.message and err.value == found


def test_write_bundle_refuses_a_directory_whose_marker_is_not_a_bundles(compiled, tmp_path):
    out = tmp_path / "fake"
    out.mkdir()
    (out / MARKER).write_text("thesis.txt\n")
    (out / "thesis.txt").write_text("thesis\n")
    err = _refused(compiled, out)
    assert "not a kernelmap bundle" in err.message and err.value == MARKER


@pytest.mark.parametrize("kind", ["empty", "bundle", "bundle-subdir"])
def test_compile_cli_refuses_to_swap_out_the_current_directory(compiled, tmp_path, monkeypatch, capsys, kind):
    """`-o .` (or `-o ..` from inside a bundle): the rename that installs the bundle would leave the shell in a
    deleted directory; refused in one line naming where to run from, and nothing changes."""
    out = tmp_path / "here"
    if kind == "empty":
        out.mkdir()
    else:
        write_bundle(compiled, out)
    cwd = out / "kernels" if kind == "bundle-subdir" else out
    before = _snapshot(out)
    monkeypatch.chdir(cwd)
    rc = main(["compile", "-m", str(compiled.gguf), "-o", ".." if kind == "bundle-subdir" else ".", "-q", "-ub", "8"])
    err = capsys.readouterr().err
    assert rc == 1, err
    lines = err.strip().splitlines()
    assert len(lines) == 2 and lines[1].startswith(f"hint: run from outside it (cd {tmp_path.resolve()} "), err
    value = "kernels" if kind == "bundle-subdir" else "."
    assert lines[0] == (f"error: {out.resolve()}: --out: the output directory is the current directory or holds it; "
                        f'the bundle replaces the whole directory (found "{value}")'), err
    assert _snapshot(out) == before
    monkeypatch.chdir(tmp_path)
    assert write_bundle(compiled, out) == out.resolve()  # from outside, the same directory is fine
