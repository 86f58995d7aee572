"""Streaming detokenization: partial UTF-8 held back, invalid bytes replaced, flush at the end."""

from __future__ import annotations

from tok_helpers import spm_metadata

from kernelmap.tokenizer import StreamDecoder, Tokenizer


def _tok() -> Tokenizer:
    return Tokenizer.from_metadata(spm_metadata({"a": -1, "\u2581": -1, "\u2581a": -0.5}, add_space_prefix=True))


def test_stream_holds_partial_emoji_until_complete():
    tok = _tok()
    ids = tok.encode("a\U0001f600a", add_bos=False)
    stream = StreamDecoder(tok)
    out = [stream.push(i) for i in ids]
    assert out[0] == "a" and out[1:4] == ["", "", ""] and out[4] == "\U0001f600"
    assert "".join(out) + stream.flush() == "a\U0001f600a"


def test_stream_invalid_byte_becomes_replacement_character():
    tok = _tok()
    stream = StreamDecoder(tok)
    assert stream.push(tok.token_id("<0xFF>")) == "\ufffd"


def test_stream_flush_replaces_an_unfinished_character_and_resets():
    tok = _tok()
    stream = StreamDecoder(tok)
    assert stream.push(tok.token_id("<0xF0>")) == ""
    assert stream.flush() == "\ufffd"
    assert stream.push(tok.token_id("a")) == "a"


def test_stream_hides_control_tokens_unless_special():
    tok = _tok()
    assert StreamDecoder(tok).push(2) == ""
    assert StreamDecoder(tok, special=True).push(2) == "</s>"


def test_stream_removes_the_space_prefix_once():
    tok = _tok()
    ids = tok.encode("a a")
    stream = StreamDecoder(tok)
    assert "".join(stream.push(i) for i in ids) + stream.flush() == "a a"
