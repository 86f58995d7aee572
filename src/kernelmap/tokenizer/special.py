"""Tokenizer stage, second step: text -> fragments (raw text pieces and special-token ids).

Reproduces llama.cpp's special-token partition exactly: special tokens (control, user-defined,
unknown) are taken longest-first (UTF-8 length, then lowest id), each claiming its leftmost
non-overlapping occurrences in the text not yet claimed. It does not run BPE.
"""

from __future__ import annotations

import re

import numpy as np

from kernelmap.tokenizer.vocab import TokenType, Vocab

__all__ = ["SpecialSplitter"]

_END = ""  # trie key marking "a token ends here" (no token text is empty)


class SpecialSplitter:
    """Finds special tokens in text; built lazily from a Vocab and reused for every call."""

    def __init__(self, vocab: Vocab) -> None:
        self._vocab = vocab
        self._built = False
        self._trie: dict = {}
        self._starts: re.Pattern[str] | None = None
        self._rank: dict[int, int] = {}
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
        if trie:
            self._starts = re.compile("[" + "".join(re.escape(c) for c in sorted(trie)) + "]")
        self._built = True

    def split(self, text: str, parse_special: bool) -> list[str | int]:
        """Cut `text` into raw strings and special-token ids, in order (empty strings never appear)."""
        if not self._built:
            self._build()
        if not text or self._starts is None:
            return [text] if text else []
        tokens = self._vocab.tokens
        found: dict[int, list[int]] = {}
        trie = self._trie
        n = len(text)
        for m in self._starts.finditer(text):
            p = m.start()
            node = trie
            q = p
            while q < n:
                node = node.get(text[q])
                if node is None:
                    break
                q += 1
                tid = node.get(_END)
                if tid is not None and (parse_special or tid not in self._parse_only):
                    found.setdefault(tid, []).append(p)
        if not found:
            return [text]
        rank = self._rank
        claimed = bytearray(n)
        picks: list[tuple[int, int, int]] = []
        for tid in sorted(found, key=rank.__getitem__):
            size = len(tokens[tid])
            mark = b"\x01" * size
            for p in found[tid]:
                if claimed.find(1, p, p + size) == -1:
                    claimed[p:p + size] = mark
                    picks.append((p, size, tid))
        picks.sort()
        out: list[str | int] = []
        pos = 0
        for p, size, tid in picks:
            if p > pos:
                out.append(text[pos:p])
            out.append(tid)
            pos = p + size
        if pos < n:
            out.append(text[pos:])
        return out
