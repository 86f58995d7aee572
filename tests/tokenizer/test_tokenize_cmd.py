"""`kernelmap tokenize`: ids and pieces on stdout, JSON with --json, chat wrapping, clean user errors."""

from __future__ import annotations

import json

import pytest

from kernelmap.cli import main


@pytest.mark.model
def test_tokenize_cmd_json_gives_ids_and_pieces(capsys, gemma):
    assert main(["tokenize", "-p", "Hello world", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == "kernelmap.tokenize/1"
    assert doc["ids"] == gemma.encode("Hello world")
    assert "".join(doc["pieces"]) == "<bos>Hello world"


@pytest.mark.model
def test_tokenize_cmd_chat_wraps_text_in_the_model_template(capsys):
    assert main(["tokenize", "-p", "Hi", "--chat", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["template"] == "gemma"
    assert "".join(doc["pieces"]) == "<bos><start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n"


def test_tokenize_cmd_bad_file_is_a_user_error(tmp_path, capsys):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"NOPE" + b"\0" * 64)
    assert main(["tokenize", "-m", str(bad), "-p", "x"]) == 1
    assert "bad.gguf" in capsys.readouterr().err
