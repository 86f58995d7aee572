"""SentencePiece-style BPE on small synthetic vocabularies: merge order, byte fallback, flags, specials."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from tok_helpers import spm_metadata

from kernelmap.tokenizer import Tokenizer
from kernelmap.tokenizer.spm import SpmEncoder

S = "\u2581"


def _ids(tok: Tokenizer, *texts: str) -> list[int]:
    return [tok.token_id(t) for t in texts]


def test_spm_merge_takes_highest_score_first():
    tok = Tokenizer.from_metadata(spm_metadata({"h": -9, "e": -9, "l": -9, "o": -9, "he": -1.0, "ll": -2.0,
                                                "hell": -3.0, "llo": -0.5}))
    assert tok.encode("hello", add_bos=False) == _ids(tok, "he", "llo")


def test_spm_merge_equal_scores_merge_leftmost_first():
    tok = Tokenizer.from_metadata(spm_metadata({"a": -9, "aa": -1.0}))
    assert tok.encode("aaa", add_bos=False) == _ids(tok, "aa", "a")


def test_spm_unknown_character_falls_back_to_utf8_byte_tokens():
    tok = Tokenizer.from_metadata(spm_metadata({"x": -1}))
    assert tok.encode("x\u00e9", add_bos=False) == _ids(tok, "x", "<0xC3>", "<0xA9>")
    assert tok.decode(tok.encode("x\u00e9")) == "x\u00e9"


def test_spm_bos_follows_model_flag_and_argument():
    tok = Tokenizer.from_metadata(spm_metadata({"x": -1}))
    assert tok.encode("x") == [1, tok.token_id("x")]
    assert tok.encode("x", add_bos=False) == [tok.token_id("x")]
    no_bos = Tokenizer.from_metadata(spm_metadata({"x": -1}, add_bos_token=False))
    assert no_bos.encode("x") == [no_bos.token_id("x")]
    assert no_bos.encode("x", add_bos=True)[0] == 1


def test_spm_add_eos_flag_appends_eos_unless_specials_are_off():
    tok = Tokenizer.from_metadata(spm_metadata({"x": -1}, add_eos_token=True))
    assert tok.encode("x") == [1, tok.token_id("x"), 2]
    assert tok.encode("x", add_bos=False) == [tok.token_id("x")]


def test_spm_space_prefix_is_added_after_specials_and_stripped_on_decode():
    tok = Tokenizer.from_metadata(spm_metadata({S + "hi": -1, "hi": -2, S: -5}, control=("<c>",),
                                               add_space_prefix=True))
    ids = tok.encode("hi<c>hi", add_bos=False)
    assert ids == _ids(tok, S + "hi", "<c>", S + "hi")
    assert tok.decode(tok.encode("hi")) == "hi"


def test_spm_spaces_become_u2581_before_merging():
    tok = Tokenizer.from_metadata(spm_metadata({"a": -9, "b": -9, S: -9, S + "b": -1}))
    assert tok.encode("a b", add_bos=False) == _ids(tok, "a", S + "b")
    assert tok.decode(tok.encode("a b")) == "a b"


def test_spm_user_defined_tokens_split_even_without_parse_special():
    tok = Tokenizer.from_metadata(spm_metadata({"a": -1, "<": -1, ">": -1, "u": -1, "c": -1},
                                               user=("<u>",), control=("<c>",)))
    assert tok.encode("a<u>a", add_bos=False, parse_special=False) == _ids(tok, "a", "<u>", "a")
    assert tok.encode("<c>", add_bos=False, parse_special=True) == _ids(tok, "<c>")
    assert tok.encode("<c>", add_bos=False, parse_special=False) == _ids(tok, "<", "c", ">")


def test_spm_special_tokens_are_claimed_longest_first_not_leftmost():
    tok = Tokenizer.from_metadata(spm_metadata({"a": -1, "b": -1, "c": -1, "d": -1}, user=("ab", "bcd")))
    assert tok.encode("abcd", add_bos=False) == _ids(tok, "a", "bcd")


def test_spm_empty_text_gives_only_bos():
    tok = Tokenizer.from_metadata(spm_metadata({"a": -1}))
    assert tok.encode("") == [1]
    assert tok.encode("", add_bos=False) == []


_PIECES = {"a": -5, "b": -5, S: -5, "ab": -1, S + "a": -2, "a" + S: -1.5, "b" + S + "a": -0.5,
           S + S: -3, S + S + "b": -0.7, "ab" + S + S + "a": -0.1, "ba": -2.5}


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=["a", "b", S, "c"], max_size=24))
def test_spm_word_cuts_give_the_same_ids_as_one_merge_over_the_whole_text(text):
    enc = SpmEncoder(Tokenizer.from_metadata(spm_metadata(_PIECES)).vocab)
    cut: list[int] = []
    enc.encode(text, cut)
    whole = enc._merge(text) if text else []
    assert cut == whole
