"""Parity with llama.cpp for byte-level BPE: synthetic "gpt2" GGUFs (llama-bpe and qwen2 pre-tokenizers)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from kernelmap.gguf import open_gguf
from kernelmap.tokenizer import Tokenizer

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
sys.path.insert(0, str(FIXTURES))
from make_tokenizer_fixtures import BPE_PRES, bpe_path, setting_key  # noqa: E402

CORPUS = json.loads((FIXTURES / "tokenizer" / "corpus.json").read_text(encoding="utf-8"))
IDS = json.loads((FIXTURES / "tokenizer" / "gemma3_llama_cpp_ids.json").read_text(encoding="utf-8"))
SETTINGS = [(s["add_bos"], s["special"]) for s in CORPUS["settings"]]


@pytest.fixture(scope="module", params=BPE_PRES)
def bpe(request) -> tuple[str, Tokenizer]:
    f = open_gguf(bpe_path(request.param))
    return request.param, Tokenizer.from_metadata(f.metadata, source=f.path)


@pytest.mark.parametrize("add_bos,special", SETTINGS)
def test_bpe_encode_corpus_equals_llama_cpp_ids(bpe, add_bos, special):
    pre, tok = bpe
    key = setting_key(add_bos, special)
    want = IDS["synthetic_bpe"][pre]["results"]
    bad = []
    for case in CORPUS["cases"]:
        ours = tok.encode(case["text"], add_bos=None if add_bos else False, parse_special=special)
        if ours != want[case["name"]][key]:
            bad.append((case["name"], ours[:16], want[case["name"]][key][:16]))
    assert not bad, f"{pre} {key}: {len(bad)} cases differ from llama.cpp; first: {bad[:3]}"


def test_bpe_decode_encode_round_trips_the_corpus(bpe):
    pre, tok = bpe
    bad = [c["name"] for c in CORPUS["cases"]
           if tok.decode(tok.encode(c["text"], add_bos=False), special=True) != c["text"]]
    assert not bad, pre


def test_bpe_fixture_files_are_the_ones_llama_cpp_saw():
    import hashlib

    for pre in BPE_PRES:
        digest = hashlib.sha256(bpe_path(pre).read_bytes()).hexdigest()
        assert digest == IDS["synthetic_bpe"][pre]["sha256"], pre
