"""Parity with llama.cpp on the Gemma 3 vocabulary: committed corpus ids, round trips, streaming."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from kernelmap.tokenizer import StreamDecoder

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
sys.path.insert(0, str(FIXTURES))
from make_tokenizer_fixtures import ids_digest, joined_text, setting_key  # noqa: E402

CORPUS = json.loads((FIXTURES / "tokenizer" / "corpus.json").read_text(encoding="utf-8"))
IDS = json.loads((FIXTURES / "tokenizer" / "gemma3_llama_cpp_ids.json").read_text(encoding="utf-8"))
SETTINGS = [(s["add_bos"], s["special"]) for s in CORPUS["settings"]]
CASES = CORPUS["cases"]

pytestmark = pytest.mark.model


def _ours(add_special: bool) -> bool | None:
    """llama-cpp-python's add_bos is llama.cpp's add_special: True means "as the model says"."""
    return None if add_special else False


def test_fixture_covers_corpus_and_records_producer():
    assert sorted(IDS["results"]) == sorted(c["name"] for c in CASES)
    assert IDS["producer"]["llama_cpp_python"]
    assert "vocab_only=True" in IDS["producer"]["call"]


@pytest.mark.parametrize("add_bos,special", SETTINGS)
def test_encode_corpus_equals_llama_cpp_ids(gemma, add_bos, special):
    key = setting_key(add_bos, special)
    bad = []
    for case in CASES:
        ours = gemma.encode(case["text"], add_bos=_ours(add_bos), parse_special=special)
        want = IDS["results"][case["name"]][key]
        if ours != want:
            bad.append((case["name"], ours[:20], want[:20]))
    assert not bad, f"{len(bad)} cases differ from llama.cpp ({key}); first: {bad[:3]}"


@pytest.mark.parametrize("add_bos,special", SETTINGS)
def test_encode_joined_corpus_equals_llama_cpp_digest(gemma, add_bos, special):
    key = setting_key(add_bos, special)
    ids = gemma.encode(joined_text(CORPUS), add_bos=_ours(add_bos), parse_special=special)
    want = IDS["joined"][key]
    assert ids[:64] == want["head"]
    assert len(ids) == want["count"]
    assert ids_digest(ids) == want["sha256"]


def _spellable(text: str) -> bool:
    """False for text the vocabulary cannot give back: a literal U+2581 decodes as a space, and
    "<0xHH>" may merge into a byte token that decodes as that byte."""
    return "\u2581" not in text and "<0x" not in text


def test_decode_encode_round_trips_every_spellable_corpus_text(gemma):
    spellable = [c for c in CASES if _spellable(c["text"])]
    assert len(spellable) > len(CASES) // 2
    bad = [c["name"] for c in spellable
           if gemma.decode(gemma.encode(c["text"], add_bos=False), special=True) != c["text"]]
    assert not bad


def test_decode_of_literal_space_marker_gives_a_space(gemma):
    assert gemma.decode(gemma.encode("a\u2581b", add_bos=False)) == "a b"


def test_decode_default_hides_bos_and_control_tokens(gemma):
    ids = gemma.encode("<start_of_turn>user\nhi<end_of_turn>")
    assert ids[0] == gemma.bos_id
    assert gemma.decode(ids) == "user\nhi"
    assert gemma.decode(ids, special=True) == "<bos><start_of_turn>user\nhi<end_of_turn>"


def test_stream_decoder_matches_decode_on_every_corpus_text(gemma):
    for case in CASES:
        ids = gemma.encode(case["text"], add_bos=True)
        stream = StreamDecoder(gemma)
        parts = [stream.push(i) for i in ids]
        parts.append(stream.flush())
        assert "".join(parts) == gemma.decode(ids), case["name"]
        assert all("\ufffd" not in p for p in parts) or "\ufffd" in case["text"], case["name"]


def test_gemma_facts_come_from_metadata(gemma):
    assert gemma.n_vocab == 262144
    assert gemma.bos_id == 2 and gemma.eos_id == 1
    assert gemma.token_id("<end_of_turn>") in gemma.eot_ids
    assert gemma.eos_id in gemma.eot_ids
    assert gemma.token_to_piece(gemma.token_id("<0x41>")) == b"A"
    assert gemma.token_to_piece(gemma.token_id("\n\n")) == b"\n\n"
