"""The tokenizer front door: GGUF metadata -> Tokenizer with encode/decode matching llama.cpp.

Special tokens are split out first (special.py), the rest goes to the algorithm the metadata names
(spm.py or bpe.py), and BOS/EOS follow the model's flags. Decoding maps ids back to bytes; it never
cleans up spaces, so decode(encode(x)) == x wherever the vocabulary can spell x.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kernelmap.errors import TokenizerError
from kernelmap.tokenizer.bpe import BpeEncoder, byte_alphabet
from kernelmap.tokenizer.special import SpecialSplitter
from kernelmap.tokenizer.spm import SPACE, SpmEncoder
from kernelmap.tokenizer.vocab import PREFIX, TokenType, Vocab, read_vocab

__all__ = ["Tokenizer"]

_HIDDEN = (TokenType.CONTROL, TokenType.UNKNOWN)


class Tokenizer:
    """Encode text to token ids and back, for a "llama" (SentencePiece BPE) or "gpt2" vocabulary."""

    def __init__(self, vocab: Vocab) -> None:
        self.vocab = vocab
        self._splitter = SpecialSplitter(vocab)
        self._spm = vocab.algorithm == "spm"
        self._encoder = SpmEncoder(vocab) if self._spm else BpeEncoder(vocab)
        self._escaped = self._spm or self._encoder.escapes_spaces
        self._pieces: dict[int, bytes] = {}
        self._unbyte: dict[str, int] | None = None

    @classmethod
    def from_metadata(cls, md: Mapping[str, Any], *, source: str = "<metadata>") -> Tokenizer:
        """Build from GGUF keys (`tokenizer.ggml.*`); raises TokenizerError naming the bad key."""
        return cls(read_vocab(md, source))

    # ---- facts ---------------------------------------------------------------------------------

    @property
    def n_vocab(self) -> int:
        return self.vocab.n_vocab

    @property
    def bos_id(self) -> int | None:
        return self.vocab.bos_id

    @property
    def eos_id(self) -> int | None:
        return self.vocab.eos_id

    @property
    def eot_ids(self) -> tuple[int, ...]:
        """Ids that end a turn (end-of-turn markers and EOS): stop tokens for generation."""
        return self.vocab.eot_ids

    def token_id(self, text: str) -> int | None:
        """The id whose token text is exactly `text`, or None."""
        return self.vocab.token_to_id.get(text)

    # ---- encode --------------------------------------------------------------------------------

    def encode(self, text: str, *, add_bos: bool | None = None, parse_special: bool = True) -> list[int]:
        """Token ids of `text`, as llama.cpp's tokenize(text, add_special, parse_special).

        add_bos None follows the model (its add_bos/add_eos flags; llama.cpp's add_special=true);
        True forces BOS; False adds neither BOS nor EOS (add_special=false). parse_special False
        leaves control-token texts as plain text (user-defined tokens are still split out).
        """
        if not isinstance(text, str):
            raise TokenizerError("text to encode is not a str", path=self.vocab.source, pointer="encode",
                                 value=type(text).__name__, expected="str")
        self._check_text(text)
        return self._encode_fragments(self._splitter.strip_around(self._splitter.split(text, parse_special)), add_bos)

    def encode_segments(self, segments: Iterable[tuple[str, bool]], *, add_bos: bool | None = None) -> list[int]:
        """Token ids of the concatenated texts of (text, is_plain) segments, as llama.cpp tokenizes the
        whole string with parse_special=true, except that control tokens are only recognised inside
        segments whose is_plain is False (chat template text; message content is plain)."""
        frags: list[str | int] = []
        for text, plain in segments:
            if not isinstance(text, str):
                raise TokenizerError("text to encode is not a str", path=self.vocab.source, pointer="encode",
                                     value=type(text).__name__, expected="str")
            self._check_text(text)
            for frag in self._splitter.split(text, not plain):
                if isinstance(frag, str) and frags and isinstance(frags[-1], str):
                    frags[-1] += frag
                else:
                    frags.append(frag)
        return self._encode_fragments(self._splitter.strip_around(frags), add_bos)

    def _check_text(self, text: str) -> None:
        """Refuse a str that is not Unicode text (lone surrogates: undecodable bytes escaped by Python's
        surrogateescape, or JSON's \\ud800): it has no UTF-8 bytes to tokenize."""
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise TokenizerError("text to encode is not valid UTF-8", path=self.vocab.source, pointer="encode",
                                 value=f"lone surrogate U+{ord(text[exc.start]):04X} at character {exc.start}",
                                 expected="Unicode text") from None

    def _encode_fragments(self, fragments: list[str | int], add_bos: bool | None) -> list[int]:
        v = self.vocab
        out: list[int] = []
        if add_bos or (add_bos is None and v.add_bos):
            if v.bos_id is None:
                raise TokenizerError("BOS requested but the model has no BOS token", path=v.source,
                                     pointer=PREFIX + "bos_token_id")
            out.append(v.bos_id)
        prev_special = True
        for frag in fragments:
            if isinstance(frag, int):
                out.append(frag)
                prev_special = True
                continue
            if self._spm:
                if v.add_space_prefix and prev_special:
                    frag = " " + frag
                self._encoder.encode(frag.replace(" ", SPACE), out)
            else:
                self._encoder.encode(frag, out)
            prev_special = False
        if add_bos is not False and v.add_eos:
            out.append(v.eos_id)
        return out

    # ---- decode --------------------------------------------------------------------------------

    def token_to_piece(self, token_id: int, *, special: bool = False) -> bytes:
        """The bytes token `token_id` stands for; control/unknown tokens are b"" unless special."""
        v = self.vocab
        if not isinstance(token_id, int) or not 0 <= token_id < v.n_vocab:
            raise TokenizerError("token id out of range", path=v.source, pointer="token_id",
                                 value=token_id, expected=f"0..{v.n_vocab - 1}")
        kind = int(v.types[token_id])
        if kind in _HIDDEN:
            return v.tokens[token_id].encode("utf-8") if special else b""
        piece = self._pieces.get(token_id)
        if piece is None:
            piece = self._piece(token_id, kind)
            self._pieces[token_id] = piece
        return piece

    def _piece(self, token_id: int, kind: int) -> bytes:
        text = self.vocab.tokens[token_id]
        if kind == TokenType.USER_DEFINED:
            return text.encode("utf-8")
        if kind == TokenType.BYTE:
            return bytes([int(text[3:5], 16)])
        if kind not in (TokenType.NORMAL,):
            return b""
        if self._escaped:
            return text.replace(SPACE, " ").encode("utf-8")
        if self._unbyte is None:
            self._unbyte = {ch: b for b, ch in enumerate(byte_alphabet())}
        unbyte = self._unbyte
        out = bytearray()
        for ch in text:
            b = unbyte.get(ch)
            if b is None:
                out += ch.encode("utf-8")
            else:
                out.append(b)
        return bytes(out)

    def decode_bytes(self, ids: Iterable[int], *, special: bool = False) -> bytes:
        """The bytes of `ids`; with an SPM space prefix, the first non-BOS token loses one leading space."""
        v = self.vocab
        strip = v.add_space_prefix
        out = bytearray()
        for tid in ids:
            piece = self.token_to_piece(tid, special=special)
            if strip and tid != v.bos_id:
                strip = False
                if piece.startswith(b" "):
                    piece = piece[1:]
            out += piece
        return bytes(out)

    def decode(self, ids: Iterable[int], *, special: bool = False) -> str:
        """Text of `ids`; bytes that are not valid UTF-8 become U+FFFD."""
        return self.decode_bytes(ids, special=special).decode("utf-8", errors="replace")
