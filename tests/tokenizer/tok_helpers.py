"""Builders for small synthetic tokenizer metadata: "llama" (SentencePiece) and "gpt2" (byte-level BPE)."""

from __future__ import annotations

from kernelmap.tokenizer.bpe import byte_alphabet

P = "tokenizer.ggml."


def spm_metadata(pieces: dict[str, float], *, user: tuple[str, ...] = (), control: tuple[str, ...] = (),
                 **flags) -> dict:
    """A "llama" vocabulary: <unk> <s> </s>, 256 byte tokens, `control`, `user`, then scored pieces."""
    tokens = ["<unk>", "<s>", "</s>"]
    types = [2, 3, 3]
    scores = [0.0, 0.0, 0.0]
    for b in range(256):
        tokens.append(f"<0x{b:02X}>")
        types.append(6)
        scores.append(0.0)
    for t in control:
        tokens.append(t)
        types.append(3)
        scores.append(0.0)
    for t in user:
        tokens.append(t)
        types.append(4)
        scores.append(0.0)
    for t, s in pieces.items():
        tokens.append(t)
        types.append(1)
        scores.append(s)
    md = {P + "model": "llama", P + "tokens": tokens, P + "scores": scores, P + "token_type": types,
          P + "bos_token_id": 1, P + "eos_token_id": 2, P + "unknown_token_id": 0,
          P + "add_bos_token": True, P + "add_space_prefix": False}
    md.update({P + k: v for k, v in flags.items()})
    return md


def bpe_metadata(merges: list[str], *, pre: str | None = "llama-bpe", extra: tuple[str, ...] = (),
                 control: tuple[str, ...] = (), **flags) -> dict:
    """A "gpt2" vocabulary: the 256-char byte alphabet, every merge result, `extra`, then `control`."""
    tokens = list(byte_alphabet())
    for m in merges:
        a, b = m.split(" ", 1)
        if a + b not in tokens:
            tokens.append(a + b)
    for t in extra:
        if t not in tokens:
            tokens.append(t)
    types = [1] * len(tokens)
    for t in control:
        tokens.append(t)
        types.append(3)
    md = {P + "model": "gpt2", P + "tokens": tokens, P + "token_type": types, P + "merges": list(merges),
          P + "bos_token_id": len(tokens) - len(control) if control else 0}
    if pre is not None:
        md[P + "pre"] = pre
    md.update({P + k: v for k, v in flags.items()})
    return md
