"""Raw GGUF image builder for tests and fuzzing: metadata and tensors in -> GGUF bytes out.

It writes exactly what it is told, including invalid headers (wrong counts, bad offsets), so error
tests can craft hostile files byte by byte. It validates nothing; use gguf-py's writer or this one's
defaults for well-formed files.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kernelmap.gguf.types import GGML_TYPES, ValueType

__all__ = ["KV", "RawTensor", "gguf_string", "gguf_kv", "build_gguf", "sample_image"]

_FMT = {
    ValueType.UINT8: "<B", ValueType.INT8: "<b", ValueType.UINT16: "<H", ValueType.INT16: "<h",
    ValueType.UINT32: "<I", ValueType.INT32: "<i", ValueType.FLOAT32: "<f", ValueType.BOOL: "<B",
    ValueType.UINT64: "<Q", ValueType.INT64: "<q", ValueType.FLOAT64: "<d",
}


@dataclass
class KV:
    """One metadata entry; `element_type` is set for arrays (`value` is then a sequence)."""

    key: str
    type: ValueType
    value: Any
    element_type: ValueType | None = None


@dataclass
class RawTensor:
    """One tensor: name, shape (GGUF order), GGML type id, its bytes; `offset` overrides placement."""

    name: str
    shape: Sequence[int]
    type_id: int
    data: bytes = b""
    offset: int | None = None


def gguf_string(s: str | bytes) -> bytes:
    """A GGUF string: u64 byte length then the bytes (str is UTF-8 encoded)."""
    raw = s.encode("utf-8") if isinstance(s, str) else s
    return struct.pack("<Q", len(raw)) + raw


def _value(vtype: ValueType, value: Any) -> bytes:
    if vtype == ValueType.STRING:
        return gguf_string(value)
    return struct.pack(_FMT[vtype], value)


def gguf_kv(kv: KV) -> bytes:
    """Serialise one metadata entry (key, type, value)."""
    out = gguf_string(kv.key) + struct.pack("<I", kv.type)
    if kv.type == ValueType.ARRAY:
        if kv.element_type is None:
            raise ValueError(f"array KV {kv.key!r} needs an element_type")
        out += struct.pack("<IQ", kv.element_type, len(kv.value))
        out += b"".join(_value(kv.element_type, v) for v in kv.value)
        return out
    return out + _value(kv.type, kv.value)


def _nbytes(t: RawTensor) -> int:
    known = GGML_TYPES[t.type_id]
    n = 1
    for d in t.shape:
        n *= d
    return n // known.block_size * known.type_size


def build_gguf(kvs: Sequence[KV], tensors: Sequence[RawTensor] = (), *, version: int = 3,
               alignment: int = 32, magic: bytes = b"GGUF", n_kv: int | None = None,
               n_tensors: int | None = None) -> bytes:
    """A GGUF image; tensors with empty `data` get zero bytes of their natural size, packed in order.

    `alignment` only positions the data (add a `general.alignment` KV yourself to declare it);
    `n_kv`/`n_tensors` override the header counts.
    """
    head = magic + struct.pack("<I", version)
    head += struct.pack("<QQ", len(tensors) if n_tensors is None else n_tensors,
                        len(kvs) if n_kv is None else n_kv)
    body = b"".join(gguf_kv(kv) for kv in kvs)
    blobs = []
    infos = b""
    cursor = 0
    for t in tensors:
        data = t.data if t.data else bytes(_nbytes(t))
        cursor += (-cursor) % alignment
        offset = cursor if t.offset is None else t.offset
        blobs.append((cursor, data))
        cursor += len(data)
        infos += gguf_string(t.name) + struct.pack("<I", len(t.shape))
        infos += struct.pack(f"<{len(t.shape)}Q", *t.shape) + struct.pack("<IQ", t.type_id, offset)
    out = bytearray(head + body + infos)
    out += bytes((-len(out)) % alignment)
    base = len(out)
    for pos, data in blobs:
        out += bytes(base + pos - len(out))
        out += data
    return bytes(out)


def sample_image() -> bytes:
    """A tiny valid v3 image (scalars, a string and a float array, f32 and q8_0 tensors) for tests."""
    kvs = [
        KV("general.architecture", ValueType.STRING, "testarch"),
        KV("test.count", ValueType.UINT32, 7),
        KV("tokenizer.ggml.tokens", ValueType.ARRAY, ["a", "bc", "\u00e9"], ValueType.STRING),
        KV("test.scores", ValueType.ARRAY, [0.5, -1.0], ValueType.FLOAT32),
    ]
    tensors = [
        RawTensor("a.weight", (8,), 0, bytes(range(32))),
        RawTensor("b.weight", (32, 2), 8, bytes(range(68))),
    ]
    return build_gguf(kvs, tensors)
