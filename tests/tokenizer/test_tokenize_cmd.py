"""`kernelmap tokenize`: ids and pieces on stdout, JSON with --json, chat wrapping, clean user errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

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


VOCAB = Path(__file__).resolve().parent.parent / "fixtures" / "tokenizer" / "vocab"
LLAMA_CPP = json.loads((VOCAB / "llama_cpp_ids.json").read_text(encoding="utf-8"))["vocabularies"]
QUESTION = "What is the capital of Italy?"  # the fixtures' one_user conversation


def _llama_cpp_prompt(vocab: str, template: str) -> list[int]:
    return next(p["ids"] for p in LLAMA_CPP[vocab]["chat"]
                if p["template"] == template and p["render"] == "one_user,add_ass=1")


@pytest.mark.parametrize("vocab,template,how", [
    ("qwen2", "chatml", "embedded"), ("qwen35", "chatml", "embedded"), ("phi-3", "phi3", "embedded"),
    ("command-r", "command-r", "embedded"), ("llama-bpe", "llama3", "assumed"),
])
def test_tokenize_cmd_chat_uses_the_family_template_and_matches_llama_cpp_ids(capsys, vocab, template, how):
    assert main(["tokenize", "-m", str(VOCAB / f"{vocab}.gguf"), "-p", QUESTION, "--chat", "--json"]) == 0
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    assert doc["template"] == template
    assert doc["ids"] == _llama_cpp_prompt(vocab, template)
    notes = [line for line in captured.err.splitlines() if line.startswith("note:")]
    if how == "assumed":
        assert len(notes) == 1 and "base model" in notes[0] and template in notes[0]
    else:
        assert not notes


def test_tokenize_cmd_chat_template_option_picks_a_named_template(capsys):
    argv = ["tokenize", "-m", str(VOCAB / "llama-spm.gguf"), "-p", QUESTION, "--chat", "--json"]
    assert main(argv) == 1  # no embedded template, no template's tokens in the vocabulary
    err = capsys.readouterr().err
    assert "--template" in err and len(err.strip().splitlines()) <= 2
    assert main([*argv, "--template", "llama2-sys"]) == 0
    assert json.loads(capsys.readouterr().out)["ids"] == _llama_cpp_prompt("llama-spm", "llama2-sys")


def test_tokenize_cmd_chat_refuses_an_unrecognised_embedded_template(capsys):
    assert main(["tokenize", "-m", str(VOCAB / "gemma-4.gguf"), "-p", "Hi", "--chat"]) == 1
    err = capsys.readouterr().err
    assert "gemma-4.gguf" in err and "tokenizer.chat_template" in err and "no family" in err


@pytest.mark.model
def test_chat_cmd_on_the_base_default_model_notes_the_assumed_template():
    proc = subprocess.run([sys.executable, "-m", "kernelmap", "chat", "-n", "4", "-t", "2", "-q"], input=QUESTION + "\n",
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr
    notes = [line for line in proc.stderr.splitlines() if line.startswith("note:")]
    assert len(notes) == 1 and "base model" in notes[0] and "gemma" in notes[0], proc.stderr
    assert proc.stdout.strip()


def test_chat_cmd_refuses_an_unsupported_template_before_compiling(capsys):
    assert main(["chat", "-m", str(VOCAB / "gemma-4.gguf"), "-q"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "tokenizer.chat_template" in err and "compiling" not in err
