"""SentencePiece-style BPE (GGUF `tokenizer.ggml.model` = "llama"): raw text fragment -> token ids.

Merges adjacent symbols by highest token score (ties: leftmost first) with a heap, as llama.cpp
does, and falls back to `<0xHH>` byte tokens for pieces that are not in the vocabulary. The text is
cut only where no vocabulary token can span the cut, so results are exact and words are memoized.
It does not find special tokens (see special.py) or add BOS/EOS.
"""

from __future__ import annotations

import heapq
import re

from kernelmap.tokenizer.vocab import Vocab

__all__ = ["SpmEncoder", "SPACE"]

SPACE = "\u2581"
_CUTS = re.compile(f"(?<=[^{SPACE}])(?={SPACE})")
_CACHE_LIMIT = 1 << 17


class SpmEncoder:
    """Encodes whitespace-escaped text with SentencePiece BPE merges by score."""

    def __init__(self, vocab: Vocab) -> None:
        self._vocab = vocab
        self._ids = vocab.token_to_id
        self._scores = vocab.scores
        self._cache: dict[str, list[int]] = {}
        self._spanning: list[tuple[str, tuple[int, ...]]] | None = None

    def encode(self, text: str, out: list[int]) -> None:
        """Append the ids of `text` (spaces already escaped to U+2581) to `out`."""
        cache = self._cache
        for seg in self._segments(text):
            ids = cache.get(seg)
            if ids is None:
                ids = self._merge(seg)
                if len(cache) >= _CACHE_LIMIT:
                    cache.clear()
                cache[seg] = ids
            out.extend(ids)

    def _spanning_tokens(self) -> list[tuple[str, tuple[int, ...]]]:
        """Tokens containing a non-space followed by U+2581, with the offsets of those cuts."""
        if self._spanning is None:
            found = []
            for t in self._vocab.tokens:
                if SPACE in t[1:]:
                    cuts = tuple(m.start() for m in _CUTS.finditer(t))
                    if cuts:
                        found.append((t, cuts))
            self._spanning = found
        return self._spanning

    def _segments(self, text: str) -> list[str]:
        """Cut before each U+2581 that follows another character, unless a token spans the cut."""
        cuts = [m.start() for m in _CUTS.finditer(text)]
        if not cuts:
            return [text]
        blocked: set[int] = set()
        for tok, offsets in self._spanning_tokens():
            at = text.find(tok)
            while at != -1:
                blocked.update(at + k for k in offsets)
                at = text.find(tok, at + 1)
        segs = []
        prev = 0
        for c in cuts:
            if c not in blocked:
                segs.append(text[prev:c])
                prev = c
        segs.append(text[prev:])
        return segs

    def _merge(self, seg: str) -> list[int]:
        """BPE over one segment: merge the best-scoring adjacent pair until none is a token."""
        get = self._ids.get
        n = len(seg)
        if n == 0:
            return []
        if n == 1:
            tid = get(seg)
            return [tid] if tid is not None else self._bytes(seg)
        scores = self._scores
        size = [1] * n
        nxt = list(range(1, n + 1))
        nxt[-1] = -1
        prv = list(range(-1, n - 1))
        heap = []
        for i in range(n - 1):
            tid = get(seg[i:i + 2])
            if tid is not None:
                heap.append((-scores[tid], i, i + 1, 2))
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
                w = size[before] + width
                tid = get(seg[before:before + w])
                if tid is not None:
                    push(heap, (-scores[tid], before, left, w))
            if after != -1:
                w = width + size[after]
                tid = get(seg[left:left + w])
                if tid is not None:
                    push(heap, (-scores[tid], left, after, w))
        out: list[int] = []
        i = 0
        while i != -1:
            piece = seg[i:i + size[i]]
            tid = get(piece)
            if tid is not None:
                out.append(tid)
            else:
                out.extend(self._bytes(piece))
            i = nxt[i]
        return out

    def _bytes(self, piece: str) -> list[int]:
        byte_token = self._vocab.byte_token
        return [byte_token(b) for b in piece.encode("utf-8")]
