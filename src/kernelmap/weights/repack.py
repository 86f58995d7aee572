"""Repacked weight layouts: which exist, which GGUF layouts and dtypes they are made from, their sizes, and
the packer's byte transform (NumPy, at pack time; the kernels read the result).

A repacked layout holds the same values as the GGUF bytes in an order a kernel reads faster; the numerics
contract does not change (a provider reading a repacked layout is one more provider of the same
contract, tested bit for bit against the contract's reference on the GGUF bytes). The resolver treats a
weight port's layout as negotiable: a request for a weight in "ggml_blocks" is met by a provider whose
port reads a layout `derivable` from it (weights are packed after resolution, in the layout the selected
provider declares). Activations and state are never repacked.

Layout "q32_r8" (the 32-element nibble formats q4_0, q4_1, q5_0, q5_1; K a multiple of 64):
rows (output columns) in groups of 8 (rows past N in the last group are zero bytes, so a group is
always whole), each group K / 64 tiles in block order, tile j holding blocks 2j and 2j + 1 of the
group's 8 rows in 8 * 2 * (block bytes) bytes:
  - per fp16 field of the block (d; and m for q4_1 / q5_1), 32 bytes: the 8 rows' field of block 2j,
    then of block 2j + 1 (one 16-byte load gives a block's 8 scales: no gather);
  - q5_0 / q5_1: two 32-byte planes H0, H1 of the fifth bits, byte i bit r = bit 4 of value i of row r
    in block 2j (H0) / 2j + 1 (H1): row r's fifth bits come out with one shift and one mask;
  - 8 x 32 bytes, row r's at 32 r: byte i = low 4 bits of value i of block 2j | those of block
    2j + 1 << 4 (one mask gives block 2j's 32 values in order, a shift and the mask block 2j + 1's).
Value i of a block is the ggml order (i < 16: the low nibble of qs[i], else the high nibble of qs[i - 16]),
so a kernel dots it against the activation block's quants as they are.
Written by hand: the transform is a few NumPy reshapes, and no library knows these layouts.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["REPACKED", "derivable", "layout_nbytes", "repack", "unpack", "shape_error"]


@dataclass(frozen=True)
class _Q32Format:
    """Byte offsets of one 32-element nibble block: its fp16 fields, the fifth bits (or None), the nibbles."""

    block: int
    halves: tuple[int, ...]
    qh: int | None
    qs: int


_Q32 = {"q4_0": _Q32Format(18, (0,), None, 2), "q4_1": _Q32Format(20, (0, 2), None, 4),
        "q5_0": _Q32Format(22, (0,), 2, 6), "q5_1": _Q32Format(24, (0, 2), 4, 8)}
ROWS = 8  # rows per group of "q32_r8"

# repacked layout -> (the GGUF layout it is made from, the dtypes it holds)
REPACKED: dict[str, tuple[str, frozenset[str]]] = {"q32_r8": ("ggml_blocks", frozenset(_Q32))}


def derivable(layout: str, source: str, dtype: str) -> bool:
    """True when the packer makes `layout` from a `dtype` tensor stored in `source` (a GGUF layout)."""
    made = REPACKED.get(layout)
    return made is not None and made[0] == source and dtype in made[1]


def shape_error(layout: str, dtype: str, shape: tuple[int, ...]) -> str | None:
    """Why `layout` cannot hold a `dtype` tensor of `shape` (GGUF order, ne0 first), or None."""
    if layout == "q32_r8":
        if dtype not in _Q32:
            return f"layout q32_r8 holds {', '.join(sorted(_Q32))}, not {dtype}"
        if len(shape) != 2 or shape[0] % 64:
            return f"layout q32_r8 needs a 2-D tensor with ne0 (K) a multiple of 64, not {list(shape)}"
    return None


def layout_nbytes(layout: str, dtype: str, shape: tuple[int, ...], plain: int) -> int:
    """Bytes of a `dtype` tensor of `shape` in `layout`; `plain` is its size in the GGUF layout."""
    if layout == "q32_r8":
        rows = int(shape[-1])
        return plain // rows * (-(-rows // ROWS) * ROWS) if rows else 0
    return plain


def _geometry(layout: str, dtype: str, shape: tuple[int, ...]) -> tuple[_Q32Format, int, int, int]:
    """(block format, rows N, blocks per row, 8-row groups) of a tensor `layout` can hold; ValueError otherwise."""
    bad = shape_error(layout, dtype, shape)
    if bad is not None or layout not in REPACKED:
        raise ValueError(bad or f"unknown repacked layout {layout}")
    n = int(shape[1])
    return _Q32[dtype], n, int(shape[0]) // 32, -(-n // ROWS)


def repack(layout: str, dtype: str, data: np.ndarray | memoryview | bytes, shape: tuple[int, ...]) -> np.ndarray:
    """The bytes of `layout` (uint8, layout_nbytes long) from a tensor's GGUF bytes; shape_error must be None."""
    f, n, nb, ng = _geometry(layout, dtype, shape)
    blocks = np.zeros((ng * ROWS, nb, f.block), dtype=np.uint8)
    blocks[:n] = np.frombuffer(data, dtype=np.uint8, count=n * nb * f.block).reshape(n, nb, f.block)
    # [group][row][tile][block of the pair][...]
    b = blocks.reshape(ng, ROWS, nb // 2, 2, f.block)
    parts = [b[..., o:o + 2].transpose(0, 2, 3, 1, 4).reshape(ng, nb // 2, 32) for o in f.halves]
    qs = b[..., f.qs:f.qs + 16]
    lo4 = np.concatenate([qs & 0x0F, qs >> 4], axis=-1)  # [g][r][t][p][32]: value i's low 4 bits
    if f.qh is not None:
        qh = np.ascontiguousarray(b[..., f.qh:f.qh + 4]).view("<u4")[..., 0]  # [g][r][t][p]
        fifth = (qh[..., None] >> np.arange(32, dtype=np.uint32)) & 1  # [g][r][t][p][i]
        planes = (fifth.astype(np.uint16) << np.arange(ROWS, dtype=np.uint16)[None, :, None, None, None]).sum(axis=1)
        parts.append(planes.astype(np.uint8).reshape(ng, nb // 2, 64))
    nib = (lo4[..., 0, :] | (lo4[..., 1, :] << 4)).transpose(0, 2, 1, 3)  # [g][t][r][32]
    parts.append(np.ascontiguousarray(nib).reshape(ng, nb // 2, ROWS * 32))
    return np.concatenate(parts, axis=-1).reshape(-1)


def unpack(layout: str, dtype: str, data: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """The GGUF bytes (uint8) of a tensor stored in `layout`: the inverse of `repack` (tests, tools)."""
    f, n, nb, ng = _geometry(layout, dtype, shape)
    tiles = np.asarray(data, dtype=np.uint8).reshape(ng, nb // 2, 2 * ROWS * f.block)
    out = np.zeros((ng, ROWS, nb // 2, 2, f.block), dtype=np.uint8)
    pos = 0
    for o in f.halves:
        out[..., o:o + 2] = tiles[..., pos:pos + 32].reshape(ng, nb // 2, 2, ROWS, 2).transpose(0, 3, 1, 2, 4)
        pos += 32
    nib = tiles[..., -ROWS * 32:].reshape(ng, nb // 2, ROWS, 32).transpose(0, 2, 1, 3)  # [g][r][t][32]
    lo4 = np.stack([nib & 0x0F, nib >> 4], axis=3)  # [g][r][t][p][32]
    out[..., f.qs:f.qs + 16] = lo4[..., :16] | (lo4[..., 16:] << 4)
    if f.qh is not None:
        planes = tiles[..., pos:pos + 64].reshape(ng, nb // 2, 2, 32)  # [g][t][p][i]
        rows = (planes[:, None] >> np.arange(ROWS, dtype=np.uint8)[None, :, None, None, None]) & 1  # [g][r][t][p][i]
        qh = (rows.astype(np.uint32) << np.arange(32, dtype=np.uint32)).sum(axis=-1, dtype=np.uint32)
        out[..., f.qh:f.qh + 4] = qh.astype("<u4")[..., None].view(np.uint8)
    return out.reshape(ng * ROWS, nb * f.block)[:n].reshape(-1)
