"""The special-token partition equals a plain transcription of llama.cpp's algorithm on random text."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from tok_helpers import spm_metadata

from kernelmap.tokenizer import Tokenizer
from kernelmap.tokenizer.special import SpecialSplitter

USER = ("  ", "   ", "    ", "\n", "\n\n", "ab", "bcd", "abc", "<<", "<u>", "b b")
CONTROL = ("<c>", "<c><c>", "cc")


def _reference(tok: Tokenizer, text: str, parse_special: bool) -> list[str | int]:
    """llama.cpp's loop: each special token, longest first, cuts every raw fragment left to right."""
    v = tok.vocab
    order = sorted((i for i, t in enumerate(v.tokens) if int(v.types[i]) in (2, 3, 4)),
                   key=lambda i: (-len(v.tokens[i].encode()), i))
    frags: list[str | int] = [text] if text else []
    for tid in order:
        if not parse_special and int(v.types[tid]) != 4:
            continue
        word = v.tokens[tid]
        out: list[str | int] = []
        for f in frags:
            if isinstance(f, int):
                out.append(f)
                continue
            while True:
                at = f.find(word)
                if at == -1:
                    if f:
                        out.append(f)
                    break
                if at:
                    out.append(f[:at])
                out.append(tid)
                f = f[at + len(word):]
        frags = out
    return frags


_TOK = Tokenizer.from_metadata(spm_metadata({"a": -1.0, "b": -1.0}, user=USER, control=CONTROL))


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=[" ", "\n", "a", "b", "c", "d", "<", ">", "u"], max_size=80), st.booleans())
def test_special_split_equals_llama_cpp_loop(text, parse_special):
    assert SpecialSplitter(_TOK.vocab).split(text, parse_special) == _reference(_TOK, text, parse_special)


@settings(max_examples=60, deadline=None)
@given(st.integers(min_value=0, max_value=300), st.sampled_from([" ", "\n", "c", "<"]), st.text(max_size=5))
def test_special_split_long_runs_equal_llama_cpp_loop(n, ch, tail):
    text = ch * n + tail + ch * (n // 2)
    assert SpecialSplitter(_TOK.vocab).split(text, True) == _reference(_TOK, text, True)
