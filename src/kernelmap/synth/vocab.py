"""Synthetic models, tokenizer part: copy every `tokenizer.*` key of a vocabulary GGUF, optionally truncated.

Input: a GGUF that holds a tokenizer (llama.cpp's vocab-only `ggml-vocab-*.gguf` files, or any model).
Output: the keys as (name, value, GGUF value type, element type) rows in file order, ready for gguf-py's
writer. Truncation (tiny test models) keeps tokens 0..keep-1 plus every control token and every token a
`*_token_id` key names beyond them (renumbered after them), drops BPE merges whose parts or result fell out,
and renumbers the `*_token_id` keys; the result is still a tokenizer llama.cpp loads. It writes nothing.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelmap.errors import ModelError
from kernelmap.gguf.reader import open_gguf

__all__ = ["TokenizerKeys", "read_tokenizer", "vocab_path", "VOCAB_ENV"]

VOCAB_ENV = "KERNELMAP_VOCAB_DIR"
_PREFIX = "tokenizer."
_KEEP_TYPES = (3,)  # control tokens are kept past a truncation (chat templates name them)


@dataclass(frozen=True)
class TokenizerKeys:
    """The tokenizer keys to write: rows (key, value, value type id, element type id or None), vocab size."""

    rows: tuple[tuple[str, Any, int, int | None], ...]
    n_vocab: int
    source: Path


def vocab_path(name: str, vocab_dir: str | os.PathLike[str] | None) -> Path:
    """`<dir>/ggml-vocab-<name>.gguf`, the directory from the argument or $KERNELMAP_VOCAB_DIR."""
    base = vocab_dir or os.environ.get(VOCAB_ENV)
    if not base:
        raise ModelError("no vocabulary directory", pointer="--vocab-dir", value=name,
                         hint=f"pass --vocab-dir (llama.cpp's models/ folder) or --vocab FILE, or set {VOCAB_ENV}")
    path = Path(base) / f"ggml-vocab-{name}.gguf"
    if not path.is_file():
        raise ModelError("vocabulary file not found", path=path, pointer="--vocab-dir")
    return path


def read_tokenizer(path: Path, keep: int | None = None) -> TokenizerKeys:
    """Every `tokenizer.*` key of `path`, in file order; truncated to `keep` tokens (+ specials) if given."""
    g = open_gguf(path)
    try:
        rows: list[tuple[str, Any, int, int | None]] = []
        for key in list(g.metadata):
            if not key.startswith(_PREFIX):
                continue
            types = g.metadata_types(key)
            if len(types) > 1:
                arr = g.metadata_array(key)
                value: Any = arr if isinstance(arr, list) else arr.tolist()
                rows.append((key, value, int(types[0]), int(types[1])))
            else:
                rows.append((key, g.metadata[key], int(types[0]), None))
    finally:
        g.close()
    table = {r[0]: r for r in rows}
    if "tokenizer.ggml.tokens" not in table:
        raise ModelError("file has no tokenizer", path=path, pointer="tokenizer.ggml.tokens")
    n = len(table["tokenizer.ggml.tokens"][1])
    if keep is None or keep >= n:
        return TokenizerKeys(tuple(rows), n, path)
    return _truncate(rows, keep, path)


def _truncate(rows: list[tuple[str, Any, int, int | None]], keep: int, path: Path) -> TokenizerKeys:
    table = {r[0]: r for r in rows}
    tokens = table["tokenizer.ggml.tokens"][1]
    ttypes = table.get("tokenizer.ggml.token_type", (None, [1] * len(tokens)))[1]
    id_keys = [r[0] for r in rows if r[0].endswith("_token_id")]
    named = {int(table[k][1]) for k in id_keys}
    kept = list(range(keep)) + [i for i in range(keep, len(tokens)) if ttypes[i] in _KEEP_TYPES or i in named]
    new_id = {old: new for new, old in enumerate(kept)}
    per_token = ("tokenizer.ggml.tokens", "tokenizer.ggml.scores", "tokenizer.ggml.token_type")
    out: list[tuple[str, Any, int, int | None]] = []
    kept_text = {tokens[i] for i in kept}
    for key, value, vtype, etype in rows:
        if key in per_token:
            value = [value[i] for i in kept]
        elif key == "tokenizer.ggml.merges":
            value = [m for m in value if _merge_kept(m, kept_text)]
        elif key in id_keys:
            if int(value) not in new_id:
                continue
            value = new_id[int(value)]
        out.append((key, value, vtype, etype))
    return TokenizerKeys(tuple(out), len(kept), path)


def _merge_kept(merge: str, kept: set[str]) -> bool:
    left, sep, right = merge.partition(" ")
    return bool(sep) and left in kept and right in kept and left + right in kept
