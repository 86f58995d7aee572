"""`kernelmap inspect`: JSON and table output on synthetic and real files, hostile strings escaped."""

from __future__ import annotations

import json

import pytest
from gguf_fixtures import write_with_gguf_py

from kernelmap.cli import main
from kernelmap.gguf.types import ValueType
from kernelmap.gguf.writer import KV, RawTensor, build_gguf


def test_inspect_json_lists_metadata_and_tensors(tmp_path, capsys):
    path = write_with_gguf_py(tmp_path / "a.gguf")
    assert main(["inspect", str(path), "--tensors", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == "kernelmap.inspect/1" and doc["version"] == 3
    meta = {m["key"]: m for m in doc["metadata"]}
    assert meta["test.u32"] == {"key": "test.u32", "type": "uint32", "value": 4_000_000_000}
    assert meta["test.arr_str"]["type"] == "[string]" and meta["test.arr_str"]["value"]["length"] == 5
    tensors = {t["name"]: t for t in doc["tensors"]}
    assert tensors["q4k.weight"]["type"] == "q4_k" and tensors["q4k.weight"]["shape"] == [256, 2]
    assert doc["tensor_types"]["f32"] == 3


def test_inspect_json_without_tensors_flag_omits_tensor_list(tmp_path, capsys):
    path = write_with_gguf_py(tmp_path / "a.gguf")
    assert main(["inspect", str(path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert "tensors" not in doc and doc["n_tensors"] == 7


def test_inspect_table_escapes_terminal_control_sequences(tmp_path, capsys):
    image = build_gguf([KV("general.name", ValueType.STRING, "evil\x1b[2Jname"),
                        KV("x.nan", ValueType.FLOAT32, float("nan"))],
                       [RawTensor("t.weight", (8,), 0)])
    path = tmp_path / "evil.gguf"
    path.write_bytes(image)
    assert main(["inspect", str(path), "--tensors"]) == 0
    out = capsys.readouterr().out
    assert "\x1b[2J" not in out and "evil\\x1b[2Jname" in out and "t.weight" in out
    assert main(["inspect", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["metadata"][1]["value"] == "nan"


def test_inspect_bad_file_exits_1_with_one_line(tmp_path, capsys):
    path = tmp_path / "bad.gguf"
    path.write_bytes(b"GGUF\x04\0\0\0" + bytes(16))
    assert main(["inspect", str(path)]) == 1
    err = capsys.readouterr().err
    assert "header/version" in err and "Traceback" not in err


def test_inspect_unknown_tensor_type_still_lists(tmp_path, capsys):
    path = tmp_path / "odd.gguf"
    path.write_bytes(build_gguf([], [RawTensor("odd", (8,), 99, data=bytes(8))]))
    assert main(["inspect", str(path), "--tensors", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["tensors"][0]["type"] == "unknown:99" and doc["tensors"][0]["n_bytes"] is None


@pytest.mark.model
def test_inspect_real_model_json(model_path, capsys):
    assert main(["inspect", model_path, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    meta = {m["key"]: m for m in doc["metadata"]}
    assert meta["tokenizer.ggml.tokens"]["value"]["length"] == 262144
    assert doc["n_tensors"] == 236
