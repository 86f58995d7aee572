"""Byte-level ("gpt2") BPE on synthetic vocabularies: pre-tokenizers, merge ranks, byte alphabet."""

from __future__ import annotations

import pytest
from tok_helpers import bpe_metadata

from kernelmap.errors import TokenizerError
from kernelmap.tokenizer import Tokenizer
from kernelmap.tokenizer.bpe import BpeEncoder, byte_alphabet

G = "\u0120"  # the byte alphabet's stand-in for a space
MERGES = [f"{G} w", f"{G}w o", "h e", "l l", "he ll", "hell o"]


def test_byte_alphabet_is_a_bijection_keeping_printable_ascii():
    table = byte_alphabet()
    assert len(set(table)) == 256
    assert table[ord("A")] == "A" and table[ord(" ")] == G


def test_bpe_llama3_pretokenizer_groups_digits_by_three_and_keeps_contractions():
    tok = Tokenizer.from_metadata(bpe_metadata(MERGES, pre="llama-bpe"))
    words = BpeEncoder(tok.vocab).words("Hello world's 12345\n\n  x!!")
    assert words == ["Hello", " world", "'s", " ", "123", "45", "\n\n", " ", " x", "!!"]


def test_bpe_qwen2_pretokenizer_splits_digits_one_by_one():
    tok = Tokenizer.from_metadata(bpe_metadata(MERGES, pre="qwen2"))
    assert BpeEncoder(tok.vocab).words("ab 123") == ["ab", " ", "1", "2", "3"]


def test_bpe_merges_apply_by_rank():
    tok = Tokenizer.from_metadata(bpe_metadata(MERGES, pre="qwen2"))
    assert tok.encode("hello wo", add_bos=False) == [tok.token_id("hello"), tok.token_id(G + "wo")]


def test_bpe_ignore_merges_takes_whole_word_tokens_only_for_pretokenizers_that_say_so():
    md = bpe_metadata(MERGES, extra=("xyz",))
    llama3 = Tokenizer.from_metadata({**md, "tokenizer.ggml.pre": "llama-bpe", "tokenizer.ggml.add_bos_token": False})
    qwen2 = Tokenizer.from_metadata({**md, "tokenizer.ggml.pre": "qwen2"})
    assert llama3.encode("xyz") == [llama3.token_id("xyz")]
    assert qwen2.encode("xyz") == [qwen2.token_id(c) for c in "xyz"]


def test_bpe_llama3_pretokenizer_adds_bos_by_default():
    tok = Tokenizer.from_metadata(bpe_metadata(MERGES, control=("<|begin_of_text|>",)))
    assert tok.encode("he")[0] == tok.token_id("<|begin_of_text|>") == tok.bos_id


def test_bpe_round_trips_arbitrary_unicode_through_the_byte_alphabet():
    tok = Tokenizer.from_metadata(bpe_metadata(MERGES, pre="qwen2"))
    text = "hello wo\u00e9\U0001f600\n\t \x00 end"
    assert tok.decode(tok.encode(text)) == text


def test_bpe_special_tokens_split_before_pretokenizing():
    tok = Tokenizer.from_metadata(bpe_metadata(MERGES, pre="qwen2", control=("<|im_end|>",)))
    ids = tok.encode("he<|im_end|>he", add_bos=False)
    assert ids == [tok.token_id("he"), tok.token_id("<|im_end|>"), tok.token_id("he")]
    assert tok.token_id("<|im_end|>") in tok.eot_ids


def test_bpe_unknown_pretokenizer_names_key_and_closest():
    with pytest.raises(TokenizerError) as exc:
        Tokenizer.from_metadata(bpe_metadata(MERGES, pre="qwen-2"))
    assert exc.value.pointer == "tokenizer.ggml.pre"
    assert "qwen2" in str(exc.value)


def test_bpe_absent_pretokenizer_uses_default_patterns():
    tok = Tokenizer.from_metadata(bpe_metadata(MERGES, pre=None))
    assert tok.decode(tok.encode("hello, world 1234")) == "hello, world 1234"
