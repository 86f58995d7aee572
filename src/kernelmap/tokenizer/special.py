"""Tokenizer stage, second step: text -> fragments (raw text pieces and special-token ids).

Reproduces llama.cpp's special-token partition exactly: special tokens (control, user-defined,
unknown) are taken longest-first (UTF-8 length, then lowest id), each claiming its leftmost
non-overlapping occurrences in the text not yet claimed. It does not run BPE.
"""

from __future__ import annotations

import re
from collections.abc import Collection

import numpy as np

from kernelmap.tokenizer.vocab import TokenType, Vocab

__all__ = ["SpecialSplitter"]

_END = ""  # trie key marking "a token ends here" (no token text is empty)
_RUN = re.compile(r"(.)\1*", re.S)
_C_SPACE = " \t\n\v\f\r"  # C isspace(), what llama.cpp strips next to special tokens


class SpecialSplitter:
    """Finds special tokens in text; built lazily from a Vocab and reused for every call."""

    def __init__(self, vocab: Vocab) -> None:
        self._vocab = vocab
        self._built = False
        self._trie: dict = {}
        self._starts: re.Pattern[str] | None = None
        self._rank: dict[int, int] = {}
        self._depth = 0
        self._parse_only: set[int] = set()

    def _build(self) -> None:
        v = self._vocab
        kinds = (TokenType.CONTROL, TokenType.USER_DEFINED, TokenType.UNKNOWN)
        ids = np.flatnonzero(np.isin(v.types, kinds)).tolist()
        ids.sort(key=lambda i: (-len(v.tokens[i].encode("utf-8")), i))
        self._rank = {tid: r for r, tid in enumerate(ids)}
        self._parse_only = {i for i in ids if int(v.types[i]) != TokenType.USER_DEFINED}
        trie: dict = {}
        for tid in ids:
            node = trie
            for ch in v.tokens[tid]:
                node = node.setdefault(ch, {})
            node[_END] = tid
        self._trie = trie
        self._depth = max((len(v.tokens[i]) for i in ids), default=0)
        if trie:
            self._starts = re.compile("[" + "".join(re.escape(c) for c in sorted(trie)) + "]")
        self._built = True

    def split(self, text: str, parse_special: bool) -> list[str | int]:
        """Cut `text` into raw strings and special-token ids, in order (empty strings never appear)."""
        if not self._built:
            self._build()
        if not text or self._starts is None:
            return [text] if text else []
        found = self._occurrences(text, () if parse_special else self._parse_only)
        if not found:
            return [text]
        picks = self._claim(text, found)
        out: list[str | int] = []
        pos = 0
        for p, size, tid in picks:
            if p > pos:
                out.append(text[pos:p])
            out.append(tid)
            pos = p + size
        if pos < len(text):
            out.append(text[pos:])
        return out

    def strip_around(self, fragments: list[str | int]) -> list[str | int]:
        """Drop the ASCII whitespace that follows a token with llama.cpp's RSTRIP attribute (the
        vocabulary's rstrip_ids); a text fragment left empty disappears."""
        rstrip = self._vocab.rstrip_ids
        if not rstrip:
            return fragments
        out: list[str | int] = []
        strip_next = False
        for frag in fragments:
            if isinstance(frag, str):
                if strip_next:
                    frag = frag.lstrip(_C_SPACE)
                if frag:
                    out.append(frag)
                strip_next = False
            else:
                out.append(frag)
                strip_next = frag in rstrip
        return out

    def _walk(self, text: str, p: int, skip: Collection[int]) -> list[int]:
        """Ids of the special tokens that occur at position `p`."""
        node = self._trie
        hits = []
        for ch in text[p:p + self._depth]:
            node = node.get(ch)
            if node is None:
                break
            tid = node.get(_END)
            if tid is not None and tid not in skip:
                hits.append(tid)
        return hits

    def _occurrences(self, text: str, skip: Collection[int]) -> dict[int, list[range]]:
        """Start positions of every special token, as ascending ranges (a long run of one character
        is walked once: every position whose look-ahead stays inside the run matches alike)."""
        found: dict[int, list[range]] = {}
        depth = self._depth
        n = len(text)
        search = self._starts.search
        pos = 0
        while True:
            m = search(text, pos)
            if m is None:
                break
            p = m.start()
            span = range(p, p + 1)
            if p + depth < n and text[p + 1] == text[p]:
                end = _RUN.match(text, p).end()
                if end - p > depth:
                    span = range(p, end - depth + 1)
            for tid in self._walk(text, p, skip):
                found.setdefault(tid, []).append(span)
            pos = span.stop
        return found

    def _claim(self, text: str, found: dict[int, list[range]]) -> list[tuple[int, int, int]]:
        """Longest token first, each takes its leftmost occurrences that overlap nothing claimed."""
        tokens = self._vocab.tokens
        n = len(text)
        claimed = bytearray(n)
        picks: list[tuple[int, int, int]] = []
        for tid in sorted(found, key=self._rank.__getitem__):
            size = len(tokens[tid])
            mark = b"\x01" * size
            cursor = 0
            for span in found[tid]:
                p = max(span.start, cursor)
                while p < span.stop:
                    blocked = claimed.find(1, p, p + size)
                    if blocked == -1:
                        claimed[p:p + size] = mark
                        picks.append((p, size, tid))
                        p += size
                        cursor = p
                        continue
                    free = claimed.find(0, blocked)
                    p = free if free != -1 else n
        picks.sort()
        return picks
