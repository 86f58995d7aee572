"""Streaming detokenization: token ids arriving one at a time -> text, only whole UTF-8 characters.

A token can end in the middle of a multi-byte character (byte-fallback tokens do this for emoji);
the partial bytes are held until the character completes. Invalid bytes become U+FFFD. It does not
decide when generation stops.
"""

from __future__ import annotations

import codecs

from kernelmap.tokenizer.tokenizer import Tokenizer

__all__ = ["StreamDecoder"]


class StreamDecoder:
    """push(id) returns the newly completed text; flush() returns what is left at the end."""

    def __init__(self, tokenizer: Tokenizer, *, special: bool = False) -> None:
        self._tok = tokenizer
        self._special = special
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._strip = tokenizer.vocab.add_space_prefix

    def push(self, token_id: int) -> str:
        """Add one token; return the text completed by it (possibly "")."""
        piece = self._tok.token_to_piece(token_id, special=self._special)
        if self._strip and token_id != self._tok.bos_id:
            self._strip = False
            if piece.startswith(b" "):
                piece = piece[1:]
        return self._utf8.decode(piece, final=False)

    def flush(self) -> str:
        """End of stream: return held bytes (an incomplete character becomes U+FFFD) and reset."""
        text = self._utf8.decode(b"", final=True)
        self._utf8.reset()
        return text
