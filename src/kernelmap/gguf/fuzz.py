"""Fuzzing support for the GGUF reader: seed images, byte-level mutations, and a full-access exerciser.

Used by tests/gguf/test_reader_fuzz.py (differential against gguf-py) and by `benchmarks/fuzz_gguf.py`.
`exercise` opens an image and touches every key, array and tensor; the only exception it may
let through is GGUFError. It does not judge messages; tests do.
"""

from __future__ import annotations

import random
import struct
from collections.abc import Iterable, Sequence

from kernelmap.errors import GGUFError
from kernelmap.gguf.reader import GGUFArray, open_gguf_bytes
from kernelmap.gguf.types import ValueType
from kernelmap.gguf.writer import KV, RawTensor, build_gguf, sample_image

__all__ = ["INTERESTING_U64", "INTERESTING_U32", "seed_images", "mutate", "random_ops", "exercise"]

INTERESTING_U64 = (0, 1, 2, 3, 4, 7, 8, 31, 32, 33, 63, 64, 255, 256, 2**31 - 1, 2**31, 2**32 - 1, 2**32,
                   2**61 + 1, 2**62, 2**63 - 1, 2**63, 2**64 - 32, 2**64 - 2, 2**64 - 1)
INTERESTING_U32 = (0, 1, 2, 3, 4, 5, 7, 8, 9, 12, 13, 14, 15, 30, 39, 99, 255, 2**16, 2**31, 2**32 - 1)


def seed_images() -> list[bytes]:
    """Small valid images that together reach every parser branch (v2/v3, arrays, alignment, types)."""
    every_scalar = [
        KV("general.architecture", ValueType.STRING, "fuzz"),
        KV("general.alignment", ValueType.UINT32, 64),
        KV("s.u8", ValueType.UINT8, 1), KV("s.i8", ValueType.INT8, -1),
        KV("s.u16", ValueType.UINT16, 2), KV("s.i16", ValueType.INT16, -2),
        KV("s.i32", ValueType.INT32, -3), KV("s.f32", ValueType.FLOAT32, 0.5),
        KV("s.b", ValueType.BOOL, 1), KV("s.u64", ValueType.UINT64, 5),
        KV("s.i64", ValueType.INT64, -5), KV("s.f64", ValueType.FLOAT64, 0.25),
        KV("a.b", ValueType.ARRAY, [1, 0, 1], ValueType.BOOL),
        KV("a.i16", ValueType.ARRAY, [1, -1], ValueType.INT16),
        KV("a.s", ValueType.ARRAY, ["x", "", "yz"], ValueType.STRING),
    ]
    tensors = [
        RawTensor("f16", (4, 2), 1, bytes(16)),
        RawTensor("q4k", (256,), 12, bytes(144)),
        RawTensor("i32", (2, 1, 1, 2), 26, bytes(16)),
        RawTensor("odd", (8,), 99, bytes(8)),
    ]
    known = [t for t in tensors if t.type_id != 99] + [RawTensor("f32", (3,), 0, bytes(range(12)))]
    return [
        sample_image(),
        build_gguf(every_scalar, tensors, alignment=64),
        build_gguf(every_scalar, known, alignment=64),  # every tensor type known to gguf-py's reader too
        build_gguf(every_scalar[:1], [RawTensor("t", (32,), 8, bytes(34))], version=2),
        build_gguf([], []),
    ]


def mutate(data: bytes, ops: Iterable[Sequence]) -> bytes:
    """Apply mutation ops: ("flip", pos, mask), ("cut", pos), ("u64", pos, v), ("u32", pos, v),
    ("insert", pos, bytes), ("delete", pos, n). Positions wrap modulo the current length."""
    buf = bytearray(data)
    for op in ops:
        kind = op[0]
        n = len(buf)
        pos = op[1] % (n + 1)
        if kind == "flip" and n:
            buf[pos % n] ^= op[2]
        elif kind == "cut":
            del buf[pos:]
        elif kind == "u64":
            buf[pos:pos + 8] = struct.pack("<Q", op[2])
        elif kind == "u32":
            buf[pos:pos + 4] = struct.pack("<I", op[2])
        elif kind == "insert":
            buf[pos:pos] = op[2]
        elif kind == "delete":
            del buf[pos:pos + op[2]]
    return bytes(buf)


def random_ops(rng: random.Random, size: int) -> list[tuple]:
    """One to four random mutation ops for an image of `size` bytes (the campaign's generator)."""
    ops: list[tuple] = []
    for _ in range(rng.randint(1, 4)):
        kind = rng.choice(("flip", "flip", "cut", "u64", "u64", "u32", "insert", "delete"))
        pos = rng.randrange(size + 1)
        if kind == "flip":
            ops.append((kind, pos, 1 << rng.randrange(8) if rng.random() < 0.7 else rng.randint(1, 255)))
        elif kind == "cut":
            ops.append((kind, pos))
        elif kind == "u64":
            ops.append((kind, pos, rng.choice(INTERESTING_U64)))
        elif kind == "u32":
            ops.append((kind, pos, rng.choice(INTERESTING_U32)))
        elif kind == "insert":
            ops.append((kind, pos, rng.randbytes(rng.randint(1, 16))))
        else:
            ops.append((kind, pos, rng.randint(1, 16)))
    return ops


def exercise(image: bytes) -> bool:
    """Open `image` and touch everything; True if it opened. Only GGUFError may escape."""
    try:
        f = open_gguf_bytes(image, name="fuzz.gguf")
    except GGUFError:
        return False
    for key in f.metadata:
        f.metadata_types(key)
        value = f.metadata[key]
        if isinstance(value, GGUFArray) and len(value):
            _touch(lambda v=value: (v[0], v[-1], v.tolist() if len(v) <= 4096 else None))
    for name, info in f.tensors.items():
        _touch(lambda i=info: (i.n_bytes, i.block_size, i.type_size))
        _touch(lambda n=name: f.tensor_data(n).sum())
        _touch(lambda n=name: f.tensor_array(n))
    _touch(f.sha256)
    f.close()
    return True


def _touch(fn) -> None:
    try:
        fn()
    except GGUFError:
        pass
