"""Tokenizer stage, first step: GGUF `tokenizer.*` metadata -> a validated `Vocab`.

Every key is treated as hostile: element types, lengths, id ranges (defaults included) and byte-token
spellings are checked before use, and each failure names the metadata key. No encoding happens here.
"""

from __future__ import annotations

import json
import numbers
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from kernelmap.errors import TokenizerError, closest

__all__ = ["Vocab", "TokenType", "read_vocab"]

_HERE = Path(__file__).resolve().parent
MAX_TOKENS = 1 << 22
MAX_TOKEN_CHARS = 1024
MAX_MERGES = 1 << 22
PREFIX = "tokenizer.ggml."


class TokenType:
    """GGUF `tokenizer.ggml.token_type` values."""

    UNDEFINED = 0
    NORMAL = 1
    UNKNOWN = 2
    CONTROL = 3
    USER_DEFINED = 4
    UNUSED = 5
    BYTE = 6


@cache
def _data(name: str) -> dict[str, Any]:
    with open(_HERE / name, encoding="utf-8") as fh:
        return json.load(fh)


@dataclass(eq=False)
class Vocab:
    """The validated vocabulary and flags of one model; `types` has llama.cpp's overrides applied."""

    source: str
    kind: str
    algorithm: str
    tokens: list[str]
    scores: list[float]
    types: np.ndarray
    token_to_id: dict[str, int]
    bos_id: int | None
    eos_id: int | None
    unk_id: int | None
    add_bos: bool
    add_eos: bool
    add_space_prefix: bool
    eot_ids: tuple[int, ...]
    pre: str | None = None
    merges: Any = None
    chat_template: str | None = None
    rstrip_ids: frozenset[int] = frozenset()
    _byte_ids: list[int | None] | None = field(default=None, repr=False)

    @property
    def n_vocab(self) -> int:
        return len(self.tokens)

    def byte_token(self, b: int) -> int:
        """The id spelling byte `b` (`<0xHH>`, else the 1-char token), or a TokenizerError."""
        if self._byte_ids is None:
            table: list[int | None] = []
            for v in range(256):
                tid = self.token_to_id.get(f"<0x{v:02X}>")
                if tid is None and v < 0x80:
                    tid = self.token_to_id.get(chr(v))
                table.append(tid)
            self._byte_ids = table
        tid = self._byte_ids[b]
        if tid is None:
            raise TokenizerError(f"no byte-fallback token for byte 0x{b:02X}", path=self.source,
                                 pointer=PREFIX + "tokens", expected=f"a token <0x{b:02X}>",
                                 hint="the vocabulary cannot spell this text")
        return tid


def _err(source: str, key: str, message: str, **fields: Any) -> TokenizerError:
    return TokenizerError(message, path=source, pointer=key, **fields)


def _get(md: Mapping[str, Any], key: str) -> Any:
    try:
        return md[key]
    except KeyError:
        return None


def _string(md: Mapping[str, Any], key: str, source: str, *, required: bool) -> str | None:
    v = _get(md, key)
    if v is None:
        if required:
            raise _err(source, key, "missing metadata key", hint="is this a GGUF with an embedded tokenizer?")
        return None
    if isinstance(v, bytes):
        try:
            v = v.decode("utf-8")
        except UnicodeDecodeError:
            raise _err(source, key, "value is not valid UTF-8", value=v[:40]) from None
    if not isinstance(v, str):
        raise _err(source, key, "wrong value type", value=type(v).__name__, expected="string")
    return v


def _flag(md: Mapping[str, Any], key: str, source: str, default: bool) -> bool:
    v = _get(md, key)
    if v is None:
        return default
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, numbers.Integral) and int(v) in (0, 1):
        return bool(int(v))
    raise _err(source, key, "wrong value type", value=v, expected="bool")


def _token_id(md: Mapping[str, Any], key: str, source: str, n: int, default: int | None) -> int | None:
    v = _get(md, key)
    if v is None:
        return default if default is not None and 0 <= default < n else None
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Integral):
        raise _err(source, key, "wrong value type", value=v, expected="integer token id")
    v = int(v)
    if not 0 <= v < n:
        raise _err(source, key, "token id out of range", value=v, expected=f"0..{n - 1}")
    return v


def _element_type(v: Any) -> str | None:
    et = getattr(v, "element_type", None)
    if et is not None:
        return str(getattr(et, "name", et)).lower()
    if isinstance(v, np.ndarray):
        return v.dtype.name
    return None


def _numeric(md: Mapping[str, Any], key: str, source: str, n: int, allowed: tuple[str, ...]) -> np.ndarray | None:
    v = _get(md, key)
    if v is None:
        return None
    et = _element_type(v)
    if et is not None and et not in allowed:
        raise _err(source, key, "wrong array element type", value=et, expected=allowed)
    if hasattr(v, "numpy"):
        arr = v.numpy()
    elif isinstance(v, (str, bytes)) or not hasattr(v, "__len__"):
        raise _err(source, key, "wrong value type", value=type(v).__name__, expected="array")
    else:
        try:
            arr = np.asarray(v)
        except (TypeError, ValueError) as exc:
            raise _err(source, key, f"not a numeric array ({exc})") from None
    if arr.ndim != 1 or (arr.size and arr.dtype.kind not in "iuf"):
        raise _err(source, key, "not a flat numeric array", value=str(arr.dtype), expected=allowed)
    if len(arr) != n:
        raise _err(source, key, "array length differs from the token count", value=len(arr),
                   expected=f"{n} (len of {PREFIX}tokens)")
    return arr


def _strings(md: Mapping[str, Any], key: str, source: str, cap: int) -> list[str] | None:
    v = _get(md, key)
    if v is None:
        return None
    et = _element_type(v)
    if et is not None and not (et.startswith("str") or et == "object"):
        raise _err(source, key, "wrong array element type", value=et, expected="string")
    if isinstance(v, (str, bytes)) or not hasattr(v, "__len__"):
        raise _err(source, key, "wrong value type", value=type(v).__name__, expected="array of string")
    if len(v) > cap:
        raise _err(source, key, "array too long", value=len(v), expected=f"at most {cap}")
    items = v.tolist() if hasattr(v, "tolist") else list(v)
    if set(map(type, items)) <= {str}:
        return items
    for i, s in enumerate(items):
        if type(s) is not str:
            if isinstance(s, bytes):
                try:
                    items[i] = s.decode("utf-8")
                    continue
                except UnicodeDecodeError:
                    raise _err(source, f"{key}/{i}", "token is not valid UTF-8", value=s[:40]) from None
            if isinstance(s, str):
                items[i] = str(s)
                continue
            raise _err(source, f"{key}/{i}", "wrong element type", value=type(s).__name__, expected="string")
    return items


def _rstrip_ids(name: str | None, rules: list[dict[str, Any]], types: np.ndarray,
                token_to_id: Mapping[str, int]) -> frozenset[int]:
    """Special tokens after which llama.cpp drops following whitespace, by special_tokens.json's
    strip_rules on general.name (lower-cased in ASCII, as llama.cpp does)."""
    if not name:
        return frozenset()
    low = "".join(chr(ord(c) + 32) if "A" <= c <= "Z" else c for c in name)
    ids: set[int] = set()
    for rule in rules:
        if not any(part in low for part in rule["general_name_contains"]):
            continue
        if rule.get("rstrip_special"):
            special = (TokenType.CONTROL, TokenType.USER_DEFINED, TokenType.UNKNOWN)
            ids.update(np.flatnonzero(np.isin(types, special)).tolist())
        ids.update(token_to_id[t] for t in rule.get("rstrip_also", []) if t in token_to_id)
        ids.difference_update(token_to_id[t] for t in rule.get("rstrip_never", []) if t in token_to_id)
        break
    return frozenset(ids)


def read_vocab(md: Mapping[str, Any], source: str = "<metadata>") -> Vocab:
    """Validate the `tokenizer.*` keys of `md` and build a Vocab (fails closed with TokenizerError)."""
    kind = _string(md, PREFIX + "model", source, required=True)
    kinds = _data("kinds.json")["kinds"]
    if kind not in kinds:
        near = closest(kind, list(kinds))
        raise _err(source, PREFIX + "model", "unsupported tokenizer model", value=kind, expected=sorted(kinds),
                   hint=f"closest: {near}" if near else None)
    spec = kinds[kind]
    defaults = spec["defaults"]

    tokens = _strings(md, PREFIX + "tokens", source, MAX_TOKENS)
    if tokens is None:
        raise _err(source, PREFIX + "tokens", "missing metadata key", hint="the GGUF has no vocabulary")
    n = len(tokens)
    if n == 0:
        raise _err(source, PREFIX + "tokens", "empty vocabulary", expected="at least one token")
    if max(map(len, tokens)) > MAX_TOKEN_CHARS:
        bad = next(i for i, t in enumerate(tokens) if len(t) > MAX_TOKEN_CHARS)
        raise _err(source, f"{PREFIX}tokens/{bad}", "token too long", value=len(tokens[bad]),
                   expected=f"at most {MAX_TOKEN_CHARS} characters")
    if not all(tokens):
        tokens = [t if t else f"[EMPTY_{i}]" for i, t in enumerate(tokens)]
    token_to_id = dict(zip(tokens, range(n), strict=True))
    if len(token_to_id) != n:
        seen: dict[str, int] = {}
        for i, t in enumerate(tokens):
            if t in seen:
                raise _err(source, f"{PREFIX}tokens/{i}", f"duplicate token (also id {seen[t]})", value=t)
            seen[t] = i

    raw_scores = _numeric(md, PREFIX + "scores", source, n, ("float32", "int32"))
    scores = raw_scores.astype(np.float32).tolist() if raw_scores is not None else [0.0] * n
    raw_types = _numeric(md, PREFIX + "token_type", source, n, ("int32",))
    types = (raw_types.astype(np.int32) if raw_types is not None
             else np.full(n, TokenType.NORMAL, dtype=np.int32))
    if raw_types is not None and raw_types.dtype.kind == "f":
        raise _err(source, PREFIX + "token_type", "wrong array element type", value=str(raw_types.dtype),
                   expected="int32")
    types = np.array(types, dtype=np.int32)
    for i in np.flatnonzero(types == TokenType.BYTE).tolist():
        t = tokens[i]
        if len(t) != 6 or not t.startswith("<0x") or t[5] != ">" or any(c not in "0123456789abcdefABCDEF"
                                                                       for c in t[3:5]):
            raise _err(source, f"{PREFIX}tokens/{i}", "byte token is not spelled <0xHH>", value=t,
                       expected="<0x00>..<0xFF>")

    special = _data("special_tokens.json")
    eot_texts = special["end_of_turn"]
    for text in (*eot_texts, *special["control"]):
        tid = token_to_id.get(text)
        if tid is not None and types[tid] != TokenType.CONTROL:
            types[tid] = TokenType.CONTROL

    bos_id = _token_id(md, PREFIX + "bos_token_id", source, n, defaults["bos_id"])
    eos_id = _token_id(md, PREFIX + "eos_token_id", source, n, defaults["eos_id"])
    unk_id = _token_id(md, PREFIX + "unknown_token_id", source, n, defaults["unk_id"])
    eot_key = _token_id(md, PREFIX + "eot_token_id", source, n, None)
    eom_key = _token_id(md, PREFIX + "eom_token_id", source, n, None)

    pre = _string(md, PREFIX + "pre", source, required=False)
    pre_spec: dict[str, Any] = {}
    if spec["algorithm"] == "bpe":
        from kernelmap.tokenizer.bpe import find_pretokenizer

        pre = spec.get("pre", pre)
        pre_spec = find_pretokenizer(pre, source)
    pre_add_bos = pre_spec.get("add_bos")
    add_bos = _flag(md, PREFIX + "add_bos_token", source,
                    defaults["add_bos"] if pre_add_bos is None else bool(pre_add_bos))
    add_bos = add_bos or bool(pre_spec.get("force_add_bos", False))
    add_eos = _flag(md, PREFIX + "add_eos_token", source, defaults["add_eos"])
    add_space_prefix = _flag(md, PREFIX + "add_space_prefix", source, defaults["add_space_prefix"])
    if spec["algorithm"] == "bpe":
        add_space_prefix = False
    if add_bos and bos_id is None:
        raise _err(source, PREFIX + "add_bos_token", "is true but no BOS token id is set",
                   hint=f"set {PREFIX}bos_token_id")
    if add_eos and eos_id is None:
        raise _err(source, PREFIX + "add_eos_token", "is true but no EOS token id is set",
                   hint=f"set {PREFIX}eos_token_id")

    eot: list[int] = [i for i in (eot_key, eom_key) if i is not None]
    eot += [token_to_id[t] for t in eot_texts if t in token_to_id]
    if eos_id is not None:
        eot.append(eos_id)
    eot_ids = tuple(sorted(set(eot)))

    merges = None
    if spec["algorithm"] == "bpe":
        merges = _strings(md, PREFIX + "merges", source, MAX_MERGES)
        if merges is None:
            raise _err(source, PREFIX + "merges", "missing metadata key", hint="a gpt2 tokenizer needs merges")

    chat_template = _string(md, "tokenizer.chat_template", source, required=False)
    rstrip_ids = _rstrip_ids(_string(md, "general.name", source, required=False), special["strip_rules"],
                             types, token_to_id)
    return Vocab(source=source, kind=kind, algorithm=spec["algorithm"], tokens=tokens, scores=scores,
                 types=types, token_to_id=token_to_id, bos_id=bos_id, eos_id=eos_id, unk_id=unk_id,
                 add_bos=add_bos, add_eos=add_eos, add_space_prefix=add_space_prefix, eot_ids=eot_ids,
                 pre=pre, merges=merges, chat_template=chat_template, rstrip_ids=rstrip_ids)
