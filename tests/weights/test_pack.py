"""Packed weights: layout, reuse by content key, fail-closed checks, atomic publication under SIGKILL.

Most tests pack with `self_contained=True` (every tensor copied into weights.bin: the path repacked
tensors take); the mapped mode (native-layout tensors left in the GGUF) has its own tests at the end."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from kernelmap.errors import GGUFError, ModelError
from kernelmap.gguf import open_gguf
from kernelmap.gguf.writer import RawTensor, build_gguf
from kernelmap.weights import WeightNeed, check_manifest, load_manifest, map_weights, pack_weights

NEEDS = [
    WeightNeed("blk0_attn_q", "blk.0.attn_q.weight", "q8_0", "ggml_blocks", (64, 3)),
    WeightNeed("blk0_ffn_up", "blk.0.ffn_up.weight", "q4_k", "ggml_blocks"),
    WeightNeed("output_norm", "output_norm.weight", "f32", "row_major", (7,)),
    WeightNeed("tok_embd", "token_embd.weight", "f16", "row_major"),
]


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELMAP_CACHE", str(tmp_path / "cache"))


@pytest.fixture
def model_file(tmp_path):
    rng = np.random.default_rng(3)
    tensors = [
        RawTensor("output_norm.weight", (7,), 0, rng.standard_normal(7).astype("<f4").tobytes()),
        RawTensor("blk.0.attn_q.weight", (64, 3), 8, rng.integers(0, 256, 6 * 34, dtype=np.uint8).tobytes()),
        RawTensor("blk.0.ffn_up.weight", (256, 2), 12, rng.integers(0, 256, 2 * 144, dtype=np.uint8).tobytes()),
        RawTensor("token_embd.weight", (5, 3), 1, rng.standard_normal(15).astype("<f2").tobytes()),
        RawTensor("odd.weight", (8,), 99, bytes(8)),
    ]
    path = tmp_path / "m.gguf"
    path.write_bytes(build_gguf([], tensors))
    return path


def test_pack_writes_aligned_native_bytes_and_manifest(model_file, tmp_path):
    out = tmp_path / "w"
    with open_gguf(model_file) as g:
        manifest = pack_weights(g, NEEDS, out, self_contained=True)
        blob = (out / "weights.bin").read_bytes()
        assert manifest.total_size == len(blob)
        for need, entry in zip(NEEDS, manifest.entries, strict=True):
            src = g.tensor_data(need.tensor).tobytes()
            assert entry.offset % 64 == 0 and entry.size == len(src)
            assert blob[entry.offset:entry.offset + entry.size] == src
            assert entry.sha256 == hashlib.sha256(src).hexdigest()
            assert entry.shape == g.tensors[need.tensor].shape
        assert manifest.source["sha256"] == hashlib.sha256(model_file.read_bytes()).hexdigest()
    loaded = load_manifest(out / "weights.json")
    assert loaded.entries == manifest.entries and loaded.key == manifest.key
    check_manifest(loaded, NEEDS)
    views = map_weights(loaded)
    assert views["output_norm"].view("<f4").shape == (7,)
    assert json.loads((out / "weights.json").read_text())["schema"] == "kernelmap.weights_manifest/2"
    assert sorted(p.name for p in out.iterdir()) == [".weights.lock", "weights.bin", "weights.json"]


def test_pack_same_needs_and_source_reuses_files(model_file, tmp_path):
    out = tmp_path / "w"
    with open_gguf(model_file) as g:
        first = pack_weights(g, NEEDS, out, self_contained=True)
        inode = os.stat(out / "weights.bin").st_ino
        second = pack_weights(g, NEEDS, out, self_contained=True)
    assert second.key == first.key and os.stat(out / "weights.bin").st_ino == inode


def test_pack_different_needs_replaces_files(model_file, tmp_path):
    out = tmp_path / "w"
    with open_gguf(model_file) as g:
        first = pack_weights(g, NEEDS, out, self_contained=True)
        second = pack_weights(g, NEEDS[:2], out, self_contained=True)
    assert second.key != first.key
    assert load_manifest(out / "weights.json").key == second.key and len(second.entries) == 2


@pytest.mark.parametrize("need,fragment", [
    (WeightNeed("w", "blk.0.attn_q.weight", "q4_0", "ggml_blocks"), "different dtype"),
    (WeightNeed("w", "output_norm.weight", "f32", "interleaved_8x8"), "unknown weight layout"),
    (WeightNeed("w", "blk.0.attn_q.weight", "q8_0", "row_major"), "cannot hold q8_0"),
    (WeightNeed("w", "output_norm.weight", "f32", "row_major", (8,)), "different shape"),
    (WeightNeed("w", "missing.weight", "f32", "row_major"), "does not have"),
    (WeightNeed("3bad", "output_norm.weight", "f32", "row_major"), "not a C identifier"),
    (WeightNeed("x*/y", "output_norm.weight", "f32", "row_major"), "not a C identifier"),
])
def test_pack_bad_need_fails_before_writing(model_file, tmp_path, need, fragment):
    out = tmp_path / "w"
    with open_gguf(model_file) as g, pytest.raises(ModelError, match=fragment):
        pack_weights(g, [need], out, self_contained=True)
    assert not out.exists()


def test_pack_duplicate_names_fail(model_file, tmp_path):
    with open_gguf(model_file) as g, pytest.raises(ModelError, match="duplicate weight name"):
        pack_weights(g, [NEEDS[2], NEEDS[2]], tmp_path / "w", self_contained=True)


def test_pack_unknown_type_in_needed_tensor_raises_gguf_error(model_file, tmp_path):
    with open_gguf(model_file) as g, pytest.raises(GGUFError, match="'odd.weight'.*type id 99"):
        pack_weights(g, [WeightNeed("odd", "odd.weight", "unknown:99", "ggml_blocks")], tmp_path / "w", self_contained=True)


@pytest.mark.parametrize("field,value", [("dtype", "q4_0"), ("layout", "row_major"), ("shape", (64, 4)),
                                         ("tensor", "other.weight")])
def test_check_manifest_disagreement_names_entry(model_file, tmp_path, field, value):
    with open_gguf(model_file) as g:
        manifest = pack_weights(g, NEEDS, tmp_path / "w", self_contained=True)
    wrong = dict(NEEDS[0].__dict__, **{field: value})
    with pytest.raises(ModelError) as info:
        check_manifest(manifest, [WeightNeed(**wrong)])
    assert "'blk0_attn_q'" in str(info.value) and info.value.pointer == f"/entries/0/{field}"
    assert "\n" not in info.value.line()


def test_check_manifest_missing_entry_fails(model_file, tmp_path):
    with open_gguf(model_file) as g:
        manifest = pack_weights(g, NEEDS[:1], tmp_path / "w", self_contained=True)
    with pytest.raises(ModelError, match="'blk0_ffn_up' is missing"):
        check_manifest(manifest, NEEDS)


def _edit_manifest(out, edit):
    doc = json.loads((out / "weights.json").read_text())
    edit(doc)
    (out / "weights.json").write_text(json.dumps(doc))


@pytest.mark.parametrize("edit,fragment,pointer", [
    (lambda d: d.update(schema="other/1"), "does not match", "/schema"),
    (lambda d: d["entries"][1].update(offset=d["entries"][1]["offset"] + 4), "aligned", "/entries/1/offset"),
    (lambda d: d["entries"][1].update(offset=0), "overlaps", "/entries/1/offset"),
    (lambda d: d["entries"][0].update(size=5), "size does not match", "/entries/0/size"),
    (lambda d: d["entries"][0].update(layout="tiled"), "does not match", "/entries/0/layout"),
    (lambda d: d["entries"][0].update(name="a b"), "does not match", "/entries/0/name"),
    (lambda d: d["entries"][2].update(name=d["entries"][0]["name"]), "duplicate entry", "/entries/2/name"),
    (lambda d: d.update(total_size=d["total_size"] - 1), "past total_size", "/entries/3/offset"),
])
def test_load_manifest_bad_field_raises(model_file, tmp_path, edit, fragment, pointer):
    out = tmp_path / "w"
    with open_gguf(model_file) as g:
        pack_weights(g, NEEDS, out, self_contained=True)
    _edit_manifest(out, edit)
    with pytest.raises(ModelError, match=fragment) as info:
        load_manifest(out / "weights.json")
    assert info.value.pointer == pointer


def test_load_manifest_truncated_data_file_raises(model_file, tmp_path):
    out = tmp_path / "w"
    with open_gguf(model_file) as g:
        pack_weights(g, NEEDS, out, self_contained=True)
    data = (out / "weights.bin").read_bytes()
    (out / "weights.bin").write_bytes(data[:-1])
    with pytest.raises(ModelError, match="data file size"):
        load_manifest(out / "weights.json")
    (out / "weights.bin").unlink()
    with pytest.raises(ModelError, match="data file is missing"):
        load_manifest(out / "weights.json")


def test_load_manifest_not_json_raises(tmp_path):
    (tmp_path / "weights.json").write_text("{nope")
    with pytest.raises(ModelError, match="not valid JSON"):
        load_manifest(tmp_path / "weights.json")


_KILL_SCRIPT = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    import kernelmap.weights.pack as pack
    from kernelmap.gguf import open_gguf
    from kernelmap.weights import WeightNeed

    stage = sys.argv[3]
    original = getattr(pack, stage)
    calls = []

    def stall(*args, **kwargs):
        result = original(*args, **kwargs)
        calls.append(1)
        if len(calls) == 2 or stage == "_replace":
            print("STALLED", flush=True)
            time.sleep(120)
        return result

    setattr(pack, stage, stall)
    needs = [WeightNeed(*row[:4]) for row in %r]
    pack.pack_weights(open_gguf(sys.argv[1]), needs, Path(sys.argv[2]), self_contained=True)
""")


def _kill_mid_pack(model_file, out, stage, needs):
    rows = [(n.name, n.tensor, n.dtype, n.layout) for n in needs]
    proc = subprocess.Popen([sys.executable, "-c", _KILL_SCRIPT % (rows,), str(model_file), str(out), stage],
                            stdout=subprocess.PIPE, env=os.environ.copy())
    try:
        line = proc.stdout.readline()
        assert line.strip() == b"STALLED"
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()


def test_pack_killed_while_writing_data_leaves_no_final_files(model_file, tmp_path):
    out = tmp_path / "w"
    _kill_mid_pack(model_file, out, "_write_entry", NEEDS)
    names = sorted(p.name for p in out.iterdir())
    assert "weights.bin" not in names and "weights.json" not in names
    assert any(n.endswith(".tmp") for n in names)
    with open_gguf(model_file) as g:
        manifest = pack_weights(g, NEEDS, out, self_contained=True)
    check_manifest(load_manifest(out / "weights.json"), NEEDS)
    assert not any(p.name.endswith(".tmp") for p in out.iterdir()) and manifest.entries


def test_pack_killed_between_data_and_manifest_leaves_no_stale_manifest(model_file, tmp_path):
    out = tmp_path / "w"
    with open_gguf(model_file) as g:
        old = pack_weights(g, NEEDS[:1], out, self_contained=True)
    _kill_mid_pack(model_file, out, "_replace", NEEDS)
    assert not (out / "weights.json").exists()
    with pytest.raises(ModelError):
        load_manifest(out / "weights.json")
    with open_gguf(model_file) as g:
        new = pack_weights(g, NEEDS, out, self_contained=True)
    assert new.key != old.key and load_manifest(out / "weights.json").key == new.key


@pytest.mark.model
def test_pack_real_model_layer_matches_gguf_bytes(model_path, tmp_path, monkeypatch):
    monkeypatch.delenv("KERNELMAP_CACHE")
    with open_gguf(model_path) as g:
        needs = [WeightNeed("tok_embd", "token_embd.weight", "q8_0", "ggml_blocks", (640, 262144))]
        for t in g.tensors.values():
            if t.name.startswith("blk.0."):
                name = t.name.removesuffix(".weight").replace(".", "_")
                layout = "row_major" if t.type_name == "f32" else "ggml_blocks"
                needs.append(WeightNeed(name, t.name, t.type_name, layout, t.shape))
        manifest = pack_weights(g, needs, tmp_path / "w", self_contained=True)
        views = map_weights(load_manifest(tmp_path / "w" / "weights.json"))
        for need in needs:
            assert np.array_equal(views[need.name], g.tensor_data(need.tensor)), need.name
    check_manifest(manifest, needs)
    assert len(manifest.entries) == len(needs) > 10


def test_pack_out_dir_is_a_file_raises_model_error(model_file, tmp_path):
    (tmp_path / "w").write_text("x")
    with open_gguf(model_file) as g, pytest.raises(ModelError, match="cannot create the weights directory"):
        pack_weights(g, NEEDS, tmp_path / "w", self_contained=True)


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores directory permissions")
def test_pack_read_only_out_dir_raises_model_error(model_file, tmp_path):
    out = tmp_path / "w"
    out.mkdir()
    out.chmod(0o500)
    try:
        with open_gguf(model_file) as g, pytest.raises(ModelError):
            pack_weights(g, NEEDS, out, self_contained=True)
    finally:
        out.chmod(0o700)


# ---- mapped mode: tensors in the GGUF layout stay in the GGUF (issue 16 item 4) ----------------------

def test_pack_mapped_leaves_native_layout_tensors_in_the_gguf_and_writes_no_bytes(model_file, tmp_path):
    out = tmp_path / "w"
    with open_gguf(model_file) as g:
        manifest = pack_weights(g, NEEDS, out)
        assert manifest.total_size == 0 and (out / "weights.bin").stat().st_size == 0
        for need, entry in zip(NEEDS, manifest.entries, strict=True):
            info = g.tensors[need.tensor]
            assert (entry.file, entry.offset, entry.size, entry.sha256) == ("gguf", info.offset, info.n_bytes, None)
        expected = {n.name: g.tensor_data(n.tensor).tobytes() for n in NEEDS}
    loaded = load_manifest(out / "weights.json")
    assert loaded.entries == manifest.entries
    check_manifest(loaded, NEEDS)
    moved = tmp_path / "moved.gguf"
    model_file.rename(moved)  # the program maps the file where it is now, not where it was packed from
    views = map_weights(loaded, moved)
    assert {k: v.tobytes() for k, v in views.items()} == expected
    assert pack_weights(open_gguf(moved), NEEDS, out).key == manifest.key  # same bytes, same key


def test_pack_mapped_copies_tensors_the_kernels_cannot_take_in_place(tmp_path):
    """A GGUF aligned to 2 bytes: a tensor at an offset that is not a multiple of 4 goes to weights.bin."""
    from kernelmap.gguf.types import ValueType
    from kernelmap.gguf.writer import KV

    tensors = [RawTensor("a.weight", (3,), 1, bytes(range(6))), RawTensor("b.weight", (2,), 1, b"\x01\x02\x03\x04")]
    path = tmp_path / "odd.gguf"
    path.write_bytes(build_gguf([KV("general.alignment", ValueType.UINT32, 2)], tensors, alignment=2))
    needs = [WeightNeed("a", "a.weight", "f16", "row_major"), WeightNeed("b", "b.weight", "f16", "row_major")]
    with open_gguf(path) as g:
        offsets = {n.name: g.tensors[n.tensor].offset for n in needs}
        assert sorted(o % 4 for o in offsets.values()) == [0, 2], "fixture: one tensor must sit at 2 mod 4"
        manifest = pack_weights(g, needs, tmp_path / "w")
        files = {e.name: e.file for e in manifest.entries}
        assert files == {n: ("gguf" if offsets[n] % 4 == 0 else "weights.bin") for n in offsets}
        views = map_weights(load_manifest(tmp_path / "w" / "weights.json"))
        for n in needs:
            assert views[n.name].tobytes() == g.tensor_data(n.tensor).tobytes()


@pytest.mark.parametrize("edit,fragment", [
    (lambda d: d["entries"][0].update(offset=d["source"]["size"]), "runs past the source size"),
    (lambda d: d["entries"][0].update(offset=d["entries"][0]["offset"] + 2), "4-byte aligned"),
    (lambda d: d["entries"][0].update(file="elsewhere"), "does not match"),
])
def test_load_manifest_refuses_a_bad_gguf_entry(model_file, tmp_path, edit, fragment):
    out = tmp_path / "w"
    with open_gguf(model_file) as g:
        pack_weights(g, NEEDS, out)
    _edit_manifest(out, edit)
    with pytest.raises(ModelError, match=fragment):
        load_manifest(out / "weights.json")


@pytest.mark.parametrize("self_contained", [False, True])
def test_pack_row_slices_map_or_copy_exactly_their_rows(model_file, tmp_path, self_contained):
    """A row slice of a native-layout tensor is its own contiguous byte range: mapped from the GGUF at that
    range (or copied, self-contained), with the slice's shape and rows recorded and checked."""
    needs = [WeightNeed("q_lo", "blk.0.attn_q.weight", "q8_0", "ggml_blocks", (64, 1), rows=(0, 1)),
             WeightNeed("q_hi", "blk.0.attn_q.weight", "q8_0", "ggml_blocks", (64, 2), rows=(1, 3))]
    out = tmp_path / "w"
    with open_gguf(model_file) as g:
        manifest = pack_weights(g, needs, out, self_contained=self_contained)
        whole = g.tensor_data("blk.0.attn_q.weight").tobytes()
    assert [e.file for e in manifest.entries] == ["weights.bin" if self_contained else "gguf"] * 2
    loaded = load_manifest(out / "weights.json")
    check_manifest(loaded, needs)
    assert [e.rows for e in loaded.entries] == [(0, 1), (1, 3)]
    views = map_weights(loaded)
    assert views["q_lo"].tobytes() == whole[:2 * 34] and views["q_hi"].tobytes() == whole[2 * 34:]
