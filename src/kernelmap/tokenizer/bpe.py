"""BPE with merge ranks (GGUF `tokenizer.ggml.model` "gpt2" and kin): raw text fragment -> token ids.

The pre-tokenizer named by `tokenizer.ggml.pre` (regexes from pretokenizers.json) cuts text into
words; each word's UTF-8 bytes are mapped to the GPT-2 byte alphabet (or, for pre-tokenizers that
say byte_encode false, kept as UTF-8 with spaces escaped to U+2581) and merged by merge rank
(lowest first, ties leftmost) with a heap. It does not find special tokens or add BOS/EOS.
"""

from __future__ import annotations

import heapq
from functools import cache
from typing import Any

import regex

from kernelmap.errors import TokenizerError, closest
from kernelmap.tokenizer.spm import SPACE
from kernelmap.tokenizer.vocab import PREFIX, Vocab, _data

__all__ = ["BpeEncoder", "byte_alphabet", "find_pretokenizer"]

_CACHE_LIMIT = 1 << 17


@cache
def byte_alphabet() -> tuple[str, ...]:
    """GPT-2's printable stand-in character for each byte value 0..255."""
    printable = set(range(0x21, 0x7F)) | set(range(0xA1, 0xAD)) | set(range(0xAE, 0x100))
    out = []
    extra = 0
    for b in range(256):
        if b in printable:
            out.append(chr(b))
        else:
            out.append(chr(0x100 + extra))
            extra += 1
    return tuple(out)


def find_pretokenizer(name: str | None, source: str) -> dict[str, Any]:
    """The pretokenizers.json entry for `tokenizer.ggml.pre` = `name` (absent means "default")."""
    key = "default" if name is None or name == "" else name
    entries = _data("pretokenizers.json")["pretokenizers"]
    for entry in entries:
        if key in entry["names"]:
            return entry
    known = sorted(n for e in entries for n in e["names"])
    near = closest(key, known)
    raise TokenizerError("unsupported pre-tokenizer", path=source, pointer=PREFIX + "pre", value=key,
                         expected=known, hint=f"closest: {near}" if near else None)


_WIDE_SPACE = regex.compile(r"[\s--[\x00-\x7f]]", flags=regex.V1)


@cache
def _compiled(patterns: tuple[str, ...]) -> tuple[tuple[regex.Pattern, bool], ...]:
    """Each pattern with its mode: True when it names no \\p{..} category, so that llama.cpp matches it
    on text whose non-ASCII whitespace was replaced by U+000B (see pretokenizers.json)."""
    return tuple((regex.compile(p), "\\p{" not in p) for p in patterns)


class BpeEncoder:
    """Encodes raw text with a pre-tokenizer plus ranked byte-level merges."""

    def __init__(self, vocab: Vocab) -> None:
        self._vocab = vocab
        self._ids = vocab.token_to_id
        spec = find_pretokenizer(vocab.pre, vocab.source)
        self._patterns = _compiled(tuple(spec["patterns"]))
        self._ignore_merges = bool(spec["ignore_merges"])
        self._byte_encode = bool(spec.get("byte_encode", True))
        self._escape_spaces = bool(spec.get("escape_spaces", False))
        self._newline_words = bool(spec.get("newline_words", False))
        self._ranks: dict[tuple[str, str], int] | None = None
        self._cache: dict[str, list[int]] = {}
        alphabet = byte_alphabet()
        self._to_alphabet = {b: alphabet[b] for b in range(256)}

    @property
    def escapes_spaces(self) -> bool:
        """True when words are raw UTF-8 with spaces as U+2581 (decoding maps U+2581 back to a space)."""
        return self._escape_spaces

    def _rank_table(self) -> dict[tuple[str, str], int]:
        if self._ranks is None:
            ranks: dict[tuple[str, str], int] = {}
            for i, m in enumerate(self._vocab.merges):
                cut = m.find(" ", 1)
                if cut == -1:
                    raise TokenizerError("merge is not two pieces separated by a space",
                                         path=self._vocab.source, pointer=f"{PREFIX}merges/{i}", value=m)
                ranks.setdefault((m[:cut], m[cut + 1:]), i)
            self._ranks = ranks
        return self._ranks

    def words(self, text: str) -> list[str]:
        """The pre-tokenizer's pieces of `text`, in order; unmatched stretches stay pieces too."""
        if self._escape_spaces:
            text = text.replace(" ", SPACE)
        cuts = [0, len(text)]
        wide = None
        for pattern, is_wide in self._patterns:
            subject = text
            if is_wide:
                if wide is None:
                    wide = _WIDE_SPACE.sub("\x0b", text)
                subject = wide
            nxt = [0]
            for a, b in zip(cuts, cuts[1:], strict=False):
                for m in pattern.finditer(subject, a, b):
                    s, e = m.span()
                    if s > nxt[-1]:
                        nxt.append(s)
                    if e > nxt[-1]:
                        nxt.append(e)
                if b > nxt[-1]:
                    nxt.append(b)
            cuts = nxt
        return [text[a:b] for a, b in zip(cuts, cuts[1:], strict=False)]

    def encode(self, text: str, out: list[int]) -> None:
        """Append the ids of raw `text` to `out`."""
        cache = self._cache
        table = self._to_alphabet
        for word in self.words(text):
            ids = cache.get(word)
            if ids is None:
                ids = self._merge("".join(table[b] for b in word.encode("utf-8")) if self._byte_encode else word)
                if len(cache) >= _CACHE_LIMIT:
                    cache.clear()
                cache[word] = ids
            out.extend(ids)

    def _merge(self, word: str) -> list[int]:
        get = self._ids.get
        if self._ignore_merges or (self._newline_words and not word.strip("\n")):
            tid = get(word)
            if tid is not None:
                return [tid]
        ranks = self._rank_table()
        n = len(word)
        if n == 0:
            return []
        size = [1] * n
        nxt = list(range(1, n + 1))
        nxt[-1] = -1
        prv = list(range(-1, n - 1))
        heap = []
        for i in range(n - 1):
            r = ranks.get((word[i], word[i + 1]))
            if r is not None:
                heap.append((r, i, i + 1, 2))
        heapq.heapify(heap)
        push, pop = heapq.heappush, heapq.heappop
        while heap:
            _, left, right, width = pop(heap)
            a, b = size[left], size[right]
            if a == 0 or b == 0 or a + b != width:
                continue
            size[left] = width
            size[right] = 0
            after = nxt[right]
            nxt[left] = after
            if after != -1:
                prv[after] = left
            before = prv[left]
            if before != -1:
                r = ranks.get((word[before:left], word[left:left + width]))
                if r is not None:
                    push(heap, (r, before, left, size[before] + width))
            if after != -1:
                r = ranks.get((word[left:after], word[after:after + size[after]]))
                if r is not None:
                    push(heap, (r, left, after, width + size[after]))
        out: list[int] = []
        i = 0
        while i != -1:
            piece = word[i:i + size[i]]
            tid = get(piece)
            if tid is not None:
                out.append(tid)
            elif not self._byte_encode:
                out.extend(self._vocab.byte_token(b) for b in piece.encode("utf-8"))
            else:
                for ch in piece:
                    cid = get(ch)
                    if cid is None:
                        raise TokenizerError("no token for a byte of the input", path=self._vocab.source,
                                             pointer=PREFIX + "tokens", value=ch,
                                             hint="the vocabulary lacks part of the byte alphabet")
                    out.append(cid)
            i = nxt[i]
        return out
