"""Parity with llama.cpp on its own vocabulary tests: every supported pre-tokenizer, ids and pieces.

Fixtures (tests/fixtures/make_vocab_fixtures.py): llama.cpp's models/ggml-vocab-NAME.gguf cut down to
the tokens its test texts can reach (original ids kept in kernelmap.fixture.original_ids), its .inp/.out
files, and llama.cpp's ids and pieces on the cut files (llama_cpp_ids.json).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from functools import cache
from pathlib import Path

import pytest

from kernelmap.errors import TokenizerError
from kernelmap.gguf import open_gguf
from kernelmap.tokenizer import Tokenizer, load_template

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
VOCAB_DIR = FIXTURES / "tokenizer" / "vocab"
sys.path.insert(0, str(FIXTURES))
from make_vocab_fixtures import ORIGINAL_IDS, SEP, VARIANTS, VOCABS  # noqa: E402

IDS = json.loads((VOCAB_DIR / "llama_cpp_ids.json").read_text(encoding="utf-8"))["vocabularies"]
CHAT = json.loads((FIXTURES / "tokenizer" / "chat_llama_cpp.json").read_text(encoding="utf-8"))
FIXTURE_NAMES = [*VOCABS, *(v[0] for v in VARIANTS)]
BASE = {**{n: n for n in VOCABS}, **{v[0]: v[1] for v in VARIANTS}}


@cache
def _load(name: str) -> tuple[Tokenizer, list[int]]:
    f = open_gguf(VOCAB_DIR / f"{name}.gguf")
    return Tokenizer.from_metadata(f.metadata, source=str(f.path)), [int(i) for i in f.metadata[ORIGINAL_IDS].tolist()]


def _texts(name: str) -> list[str]:
    raw = (VOCAB_DIR / f"{BASE[name]}.inp").read_bytes().decode("utf-8")
    texts = raw.split(SEP)
    return texts[:-1] if texts and texts[-1] == "" else texts


def _expected_out(name: str) -> list[list[int]]:
    lines = (VOCAB_DIR / f"{BASE[name]}.out").read_text(encoding="utf-8").split("\n")
    return [[int(x) for x in line.split()] for line in lines[:len(_texts(name))]]


def _show(name: str, bad: list[tuple[int, list[int], list[int]]], texts: list[str]) -> str:
    i, ours, want = bad[0]
    return (f"{name}: {len(bad)} of {len(texts)} llama.cpp test texts differ; first: case {i} {texts[i][:40]!r}: "
            f"ours {ours[:12]} vs llama.cpp {want[:12]}")


@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_vocab_encode_of_llama_cpp_test_texts_equals_llama_cpp_ids(name):
    tok, _ = _load(name)
    texts = _texts(name)
    want = IDS[name]["cases"]
    assert len(want) == len(texts)
    bad = [(i, ours, w) for i, (t, w) in enumerate(zip(texts, want, strict=True))
           if (ours := tok.encode(t, add_bos=False, parse_special=False)) != w]
    assert not bad, _show(name, bad, texts)


@pytest.mark.parametrize("name", VOCABS)
def test_vocab_fixture_ids_are_llama_cpp_test_outputs_in_original_numbering(name):
    _, original = _load(name)
    mapped = [[original[i] for i in ids] for ids in IDS[name]["cases"]]
    assert mapped == _expected_out(name), f"{name}: the cut vocabulary's ids do not map back to the .out file"


@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_vocab_fixture_file_is_the_one_llama_cpp_tokenized(name):
    digest = hashlib.sha256((VOCAB_DIR / f"{name}.gguf").read_bytes()).hexdigest()
    assert digest == IDS[name]["sha256"], f"{name}.gguf changed since llama.cpp's ids were recorded"


@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_vocab_token_pieces_equal_llama_cpp_token_to_piece(name):
    tok, _ = _load(name)
    bad = []
    for tid, (plain, special) in IDS[name]["pieces"].items():
        for flag, want in ((False, plain), (True, special)):
            got = tok.token_to_piece(int(tid), special=flag).hex()
            if got != want:
                bad.append((tid, flag, bytes.fromhex(got), bytes.fromhex(want)))
    assert not bad, f"{name}: {len(bad)} pieces differ; first (id, special, ours, llama.cpp): {bad[0]}"


@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_vocab_decode_of_llama_cpp_ids_round_trips_the_test_texts(name):
    tok, _ = _load(name)
    texts = _texts(name)
    bad = [i for i, (t, ids) in enumerate(zip(texts, IDS[name]["cases"], strict=True)) if tok.decode(ids) != t]
    assert not bad, f"{name}: decode(llama.cpp ids) != text for cases {bad[:5]}"


@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_vocab_default_encode_adds_bos_eos_as_llama_cpp_does(name):
    tok, _ = _load(name)
    probe = IDS[name]["bos_probe"]
    assert tok.encode(probe["text"]) == probe["ids"], name


_CHAT_CASES = [(name, p["template"], p["render"]) for name in VOCABS for p in IDS[name]["chat"]]


@pytest.mark.parametrize("name,template,render", _CHAT_CASES)
def test_vocab_chat_prompt_encodes_like_llama_cpp_tokenizes_the_rendered_text(name, template, render):
    tok, _ = _load(name)
    conv, flag = render.split(",add_ass=")
    tpl = load_template(template)
    messages = CHAT["conversations"][conv]
    assert tpl.render(messages, flag == "1") == CHAT["templates"][f"name:{template}"]["renders"][render]
    want = next(p["ids"] for p in IDS[name]["chat"] if p["template"] == template and p["render"] == render)
    ours = tpl.encode(tok, messages, flag == "1")
    assert ours == want, f"{name} {template} {render}: ours {ours[:16]} vs llama.cpp {want[:16]}"


def test_vocab_chat_content_never_becomes_a_special_token():
    tok, _ = _load("qwen2")
    tpl = load_template("chatml")
    ids = tpl.encode(tok, [{"role": "user", "content": "hi<|im_end|>"}])
    assert ids.count(tok.token_id("<|im_end|>")) == 1


def test_vocab_phi3_name_rule_strips_whitespace_after_special_tokens():
    tok, _ = _load("phi-3")
    user = tok.token_id("<|user|>")
    assert user in tok.vocab.rstrip_ids
    assert tok.encode("<|user|>\nHi", add_bos=False) == tok.encode("<|user|>Hi", add_bos=False)


def test_vocab_unsupported_tokenizer_model_is_refused_by_name():
    md = {"tokenizer.ggml.model": "bert", "tokenizer.ggml.tokens": ["[PAD]", "a"]}
    with pytest.raises(TokenizerError) as exc:
        Tokenizer.from_metadata(md, source="enc.gguf")
    msg = str(exc.value)
    assert exc.value.pointer == "tokenizer.ggml.model" and "bert" in msg and "gpt2" in msg and "\n" not in msg.split(
        "hint:")[0].strip()


@pytest.mark.parametrize("pre", ["kimi-k2", "tekken", "gpt-4o", "chatglm-bpe"])
def test_vocab_unsupported_pretokenizer_is_refused_by_name(pre):
    md = dict(open_gguf(VOCAB_DIR / "gpt-2.gguf").metadata)
    md["tokenizer.ggml.pre"] = pre
    with pytest.raises(TokenizerError) as exc:
        Tokenizer.from_metadata(md, source="m.gguf")
    assert exc.value.pointer == "tokenizer.ggml.pre" and pre in str(exc.value) and "qwen35" in str(exc.value)


_SRC = os.environ.get("KERNELMAP_LLAMA_CPP_SRC")


@pytest.mark.slow
@pytest.mark.skipif(not _SRC, reason="set KERNELMAP_LLAMA_CPP_SRC to llama.cpp's source tree to test its full vocabularies")
@pytest.mark.parametrize("name", VOCABS)
def test_vocab_full_llama_cpp_vocabulary_encodes_its_test_texts_to_the_out_ids(name):
    path = Path(_SRC) / "models" / f"ggml-vocab-{name}.gguf"
    f = open_gguf(path)
    tok = Tokenizer.from_metadata(f.metadata, source=str(path))
    texts = _texts(name)
    want = _expected_out(name)
    bad = [(i, ours, w) for i, (t, w) in enumerate(zip(texts, want, strict=True))
           if (ours := tok.encode(t, add_bos=False, parse_special=False)) != w]
    assert not bad, _show(name, bad, texts)
