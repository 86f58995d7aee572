"""GGUF value types and the GGML tensor type table (id, name, block size, bytes per block).

Pure data used by the reader and the weight packer; it knows nothing about files. A type id that
is not in the table is "unknown:<id>": the reader keeps such tensors, and asking for their block
geometry raises `GGUFError` naming the tensor and the type id.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

from kernelmap.errors import GGUFError

__all__ = ["ValueType", "GGMLType", "GGML_TYPES", "ggml_type", "type_name", "tensor_nbytes", "by_name",
           "unknown_type_error"]


class ValueType(IntEnum):
    """GGUF metadata value type ids (same numbering as the GGUF specification)."""

    UINT8 = 0
    INT8 = 1
    UINT16 = 2
    INT16 = 3
    UINT32 = 4
    INT32 = 5
    FLOAT32 = 6
    BOOL = 7
    STRING = 8
    ARRAY = 9
    UINT64 = 10
    INT64 = 11
    FLOAT64 = 12


@dataclass(frozen=True)
class GGMLType:
    """One GGML tensor storage type: `block_size` elements are stored in `type_size` bytes."""

    id: int
    name: str
    block_size: int
    type_size: int


_QK_K = 256

# (id, name, elements per block, bytes per block); layouts follow ggml's block structs.
_TABLE: tuple[tuple[int, str, int, int], ...] = (
    (0, "f32", 1, 4),
    (1, "f16", 1, 2),
    (2, "q4_0", 32, 2 + 16),
    (3, "q4_1", 32, 2 + 2 + 16),
    (6, "q5_0", 32, 2 + 4 + 16),
    (7, "q5_1", 32, 2 + 2 + 4 + 16),
    (8, "q8_0", 32, 2 + 32),
    # ggml's block_q8_1 is {f16 d, f16 s, int8 qs[32]} (llama.cpp 0.3.36, the CPU's q4_1 / q5_1 activation type):
    # 36 bytes, not the 40 of gguf-py's table (the f32 d, s of an old layout). The arena's row offsets of a q8_1
    # activation use this size: with 40 a last-row op read the wrong row (Q5_K_M's last-layer q projection).
    (9, "q8_1", 32, 2 + 2 + 32),
    (10, "q2_k", _QK_K, 2 + 2 + _QK_K // 16 + _QK_K // 4),
    (11, "q3_k", _QK_K, 2 + _QK_K // 4 + _QK_K // 8 + 12),
    (12, "q4_k", _QK_K, 2 + 2 + 12 + _QK_K // 2),
    (13, "q5_k", _QK_K, 2 + 2 + 12 + _QK_K // 8 + _QK_K // 2),
    (14, "q6_k", _QK_K, _QK_K // 2 + _QK_K // 4 + _QK_K // 16 + 2),
    (15, "q8_k", _QK_K, 4 + _QK_K + 2 * (_QK_K // 16)),
    (16, "iq2_xxs", _QK_K, 2 + _QK_K // 4),
    (17, "iq2_xs", _QK_K, 2 + _QK_K // 4 + _QK_K // 32),
    (18, "iq3_xxs", _QK_K, 2 + 3 * (_QK_K // 8)),
    (19, "iq1_s", _QK_K, 2 + _QK_K // 8 + _QK_K // 16),
    (20, "iq4_nl", 32, 2 + 16),
    (21, "iq3_s", _QK_K, 2 + _QK_K // 4 + _QK_K // 8 + _QK_K // 32 + 4),
    (22, "iq2_s", _QK_K, 2 + _QK_K // 4 + _QK_K // 16),
    (23, "iq4_xs", _QK_K, 2 + 2 + _QK_K // 2 + _QK_K // 64),
    (24, "i8", 1, 1),
    (25, "i16", 1, 2),
    (26, "i32", 1, 4),
    (27, "i64", 1, 8),
    (28, "f64", 1, 8),
    (29, "iq1_m", _QK_K, _QK_K // 8 + _QK_K // 16 + _QK_K // 32),
    (30, "bf16", 1, 2),
    (34, "tq1_0", _QK_K, 2 + 4 * 13),
    (35, "tq2_0", _QK_K, 2 + _QK_K // 4),
    (39, "mxfp4", 32, 1 + 16),
)

GGML_TYPES: dict[int, GGMLType] = {t[0]: GGMLType(*t) for t in _TABLE}
_BY_NAME: dict[str, GGMLType] = {t.name: t for t in GGML_TYPES.values()}


def type_name(type_id: int) -> str:
    """The GGML spelling of a type id (`q4_k`), or `unknown:<id>` for an id not in the table."""
    known = GGML_TYPES.get(type_id)
    return known.name if known else f"unknown:{type_id}"


def ggml_type(type_id: int, *, tensor: str | None = None, path: str | None = None) -> GGMLType:
    """The table entry for `type_id`; an unknown id raises GGUFError naming the tensor and the id."""
    known = GGML_TYPES.get(type_id)
    if known is None:
        raise unknown_type_error(type_id, tensor=tensor, path=path)
    return known


def unknown_type_error(type_id: int, *, tensor: str | None = None, path: str | None = None) -> GGUFError:
    """The error for a tensor whose GGML type id is not in the table (names tensor and id)."""
    where = f"tensor {tensor!r} " if tensor is not None else ""
    return GGUFError(
        f"{where}has unsupported ggml type id {type_id}",
        path=path,
        pointer=f"tensors/{tensor}/type" if tensor is not None else "type",
        value=type_id,
        expected="one of " + ", ".join(t.name for t in GGML_TYPES.values()),
        hint="this tensor's data cannot be read by kernelmap; requantize the model to a supported type",
    )


def tensor_nbytes(ggml: GGMLType, shape: tuple[int, ...]) -> int:
    """Bytes of a tensor of `shape` (GGUF order, ne0 first); ne0 must be a multiple of the block size."""
    n = 1
    for d in shape:
        n *= d
    return n // ggml.block_size * ggml.type_size


def by_name(name: str) -> GGMLType | None:
    """The table entry for a GGML type name such as `q4_k`, or None."""
    return _BY_NAME.get(name)
