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

Layout "q8_0_c16" (q8_0; any K, a multiple of 32 as every q8_0 row is): rows (output columns) in groups of 16
(rows past N in the last group are zero bytes), each group S + 512 * nb bytes (nb = K / 32 blocks, S = 32 * nb
rounded up to a multiple of 64, so a 64-byte aligned tensor keeps every group and code vector aligned):
  - byte 32 b + 2 c (b < nb, c < 16): row c's fp16 d of block b (one 32-byte load gives a block's 16 scales);
  - byte S + 512 b + 64 l + 4 c + i (l < 8, i < 4): value 4 l + i of row c's block b with its sign bit
    flipped (the int8 + 128 as an unsigned byte).
One 64-byte load is contract lane l's four values of 16 rows, the operand of one 512-bit integer dot against
the activation's four quants broadcast (the column-lane vectors linear/q32_gemm_body.h builds by gathers from
the GGUF layout), so a decode GEMV reads each weight byte once, in order, with no shuffle.

Layout "iq4_nl_c16" (iq4_nl; any K, a multiple of 32): rows (output columns) in groups of 16 (rows past N in the
last group are zero bytes), each group S + 256 * nb bytes (nb = K / 32, S = 32 * nb rounded up to 64):
  - byte 32 b + 2 c (b < nb, c < 16): row c's fp16 d of block b, as "q8_0_c16";
  - byte S + 256 b + 64 t + 4 c + i (t < 4, i < 4): byte 4 t + i of row c's block b's 16 nibble bytes (its low
    nibble value 4 t + i, its high nibble value 16 + 4 t + i).
One 64-byte load is dword t of 16 rows' nibbles: a mask and a shift give values 4t..4t+3 and 16+4t.. of 16 rows as
column lanes, a table lookup their values (linear/iq4_nl_body.h): a decode GEMV reads each weight byte once, in
order, with no gather.

Layout "q4_k_c16" (q4_K; K a multiple of 256): rows in groups of 16 (pad rows zero bytes), each group nb = K / 256
records of 2368 bytes, record b holding superblock b of the 16 rows:
  - bytes [0, 2048): vector v = 8 k + t (k < 4, t < 8) at 64 v, row c's four bytes at 64 v + 4 c = the block's
    qs[32 k + 4 t .. + 3] as they are (low nibbles: values 64 k + 4 t + i of sub-block 2 k, high nibbles: of
    sub-block 2 k + 1);
  - byte 2048 + 16 j + c: the 6-bit scale of sub-block j of row c, unpacked; byte 2176 + 16 j + c: its min;
  - bytes 2304 + 2 c: row c's f16 d; 2336 + 2 c: its f16 dmin.
Every code vector is 64-byte aligned in an aligned tensor (2368 = 37 * 64); 2.8% more bytes than the GGUF's 144
per row and superblock (the scales and mins unpacked, so no 6-bit unpacking per row at run time).

Layout "q2_k_c16" (q2_K; K a multiple of 256): the same groups, records of 1344 bytes (= 16 * 84, 21 * 64):
  - bytes [0, 1024): vector v = 8 h + t (h < 2, t < 8) at 64 v, row c's four bytes at 64 v + 4 c = the block's
    qs[32 h + 4 t .. + 3] (bits 2k, 2k + 1 of byte i: value 128 h + 32 k + 4 t + i);
  - byte 1024 + 16 j + c: row c's scale byte j as it is (low nibble scale, high nibble min of values 16j..16j+15);
  - bytes 1280 + 2 c: row c's f16 d; 1312 + 2 c: its f16 dmin.

Layout "q3_k_c16" (q3_K; K a multiple of 256): the same groups, records of 1824 bytes (16 * 110 + 64):
  - bytes [0, 1024): vector v = 8 h + t (h < 2, t < 8) at 64 v, row c's four bytes at 64 v + 4 c = the block's
    qs[32 h + 4 t .. + 3] (bits 2k, 2k + 1 of byte i: the low bits of value 128 h + 32 k + 4 t + i);
  - bytes [1024, 1536): vector t (t < 8) at 1024 + 64 t, row c's four bytes at 1024 + 64 t + 4 c = the block's
    hmask[4 t .. + 3] (bit 4 h + k of byte i: the high bit of value 128 h + 32 k + i);
  - byte 1536 + 16 j + c: row c's signed 6-bit scale of values 16 j .. 16 j + 15, unpacked (the stored value - 32,
    as int8);
  - bytes 1792 + 2 c: row c's f16 d.
So contract lane l = t of a vec_dot superblock (values 32 c + 4 l + i) is vector t's bytes: the codes of 16 rows
for four values with one shift and two masks, no gathers; 3.6% more bytes than the GGUF's 110 per row and
superblock (the scales unpacked). Records are 32-byte aligned (1824 = 28.5 * 64).

Layout "q6_k_c16" (q6_K; K a multiple of 256): the same groups, records of 3360 bytes (16 * 210, no byte more than
the GGUF's):
  - bytes [0, 2048): vector v = 16 h + 8 p + l (h, p < 2, l < 8) at 64 v, row c's four bytes at 64 v + 4 c = the
    block's ql[4 v .. + 3] (low nibbles: the low bits of values 128 h + 32 p + 4 l + i, high nibbles: of values
    128 h + 32 (p + 2) + 4 l + i);
  - bytes [2048, 3072): vector t = 8 h + l at 2048 + 64 t, row c's four bytes at 2048 + 64 t + 4 c = the block's
    qh[4 t .. + 3] (bits 2 q, 2 q + 1 of byte i: the top bits of value 128 h + 32 q + 4 l + i);
  - bytes 3072 + 32 s + 2 c, + 1 (s < 8): row c's int8 scales 2 s and 2 s + 1 as they are (one sign-extending load
    gives the 16 rows' scale pairs as int16 pairs);
  - bytes 3328 + 2 c: row c's f16 d.
So contract lane l of a vec_dot superblock (values 32 c + 4 l + i, c = 4 h + q) is ql vector 16 h + 8 (q % 2) + l's
nibble q / 2 and qh vector 8 h + l's bit pair q: the 6-bit codes of 16 rows for four values in two to three
operations, no gathers. Records are 32-byte aligned (3360 = 52.5 * 64).
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
C16 = 16  # rows per group of "q8_0_c16"

# repacked layout -> (the GGUF layout it is made from, the dtypes it holds)
REPACKED: dict[str, tuple[str, frozenset[str]]] = {"q32_r8": ("ggml_blocks", frozenset(_Q32)),
                                                   "q8_0_c16": ("ggml_blocks", frozenset({"q8_0"})),
                                                   "iq4_nl_c16": ("ggml_blocks", frozenset({"iq4_nl"})),
                                                   "q4_k_c16": ("ggml_blocks", frozenset({"q4_k"})),
                                                   "q2_k_c16": ("ggml_blocks", frozenset({"q2_k"})),
                                                   "q3_k_c16": ("ggml_blocks", frozenset({"q3_k"})),
                                                   "q6_k_c16": ("ggml_blocks", frozenset({"q6_k"}))}
Q4K_C16_RECORD = 2368  # bytes of one superblock of a "q4_k_c16" group
Q2K_C16_RECORD = 1344  # ... of a "q2_k_c16" group
Q3K_C16_RECORD = 1824  # ... of a "q3_k_c16" group
Q6K_C16_RECORD = 3360  # ... of a "q6_k_c16" group
_KC16_RECORD = {"q4_k_c16": Q4K_C16_RECORD, "q2_k_c16": Q2K_C16_RECORD, "q3_k_c16": Q3K_C16_RECORD,
                "q6_k_c16": Q6K_C16_RECORD}
# "q6_k_c16": (record offset, GGUF block offset, GGUF bytes, word size) of each field moved word-wise
_Q6K_FIELDS = ((0, 0, 128, 4), (2048, 128, 64, 4), (3072, 192, 16, 2), (3328, 208, 2, 2))


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
    if layout == "q8_0_c16":
        if dtype != "q8_0":
            return f"layout q8_0_c16 holds q8_0, not {dtype}"
        if len(shape) != 2 or shape[0] % 32 or not shape[0]:
            return f"layout q8_0_c16 needs a 2-D tensor with ne0 (K) a positive multiple of 32, not {list(shape)}"
    if layout == "iq4_nl_c16":
        if dtype != "iq4_nl":
            return f"layout iq4_nl_c16 holds iq4_nl, not {dtype}"
        if len(shape) != 2 or shape[0] % 32 or not shape[0]:
            return f"layout iq4_nl_c16 needs a 2-D tensor with ne0 (K) a positive multiple of 32, not {list(shape)}"
    if layout in _KC16_RECORD:
        want = layout[:4]
        if dtype != want:
            return f"layout {layout} holds {want}, not {dtype}"
        if len(shape) != 2 or shape[0] % 256 or not shape[0]:
            return f"layout {layout} needs a 2-D tensor with ne0 (K) a positive multiple of 256, not {list(shape)}"
    return None


def _c16_scales(nb: int) -> int:
    """S: the bytes of a "q8_0_c16" group's scale area (32 per block, rounded up to 64)."""
    return -(-32 * nb // 64) * 64


def layout_nbytes(layout: str, dtype: str, shape: tuple[int, ...], plain: int) -> int:
    """Bytes of a `dtype` tensor of `shape` in `layout`; `plain` is its size in the GGUF layout."""
    if layout == "q32_r8":
        rows = int(shape[-1])
        return plain // rows * (-(-rows // ROWS) * ROWS) if rows else 0
    if layout == "q8_0_c16":
        nb = int(shape[0]) // 32
        return -(-int(shape[-1]) // C16) * (_c16_scales(nb) + 512 * nb)
    if layout == "iq4_nl_c16":
        nb = int(shape[0]) // 32
        return -(-int(shape[-1]) // C16) * (_c16_scales(nb) + 256 * nb)
    if layout in _KC16_RECORD:
        return -(-int(shape[-1]) // C16) * _KC16_RECORD[layout] * (int(shape[0]) // 256)
    return plain


def _geometry(layout: str, dtype: str, shape: tuple[int, ...]) -> tuple[_Q32Format, int, int, int]:
    """(block format, rows N, blocks per row, 8-row groups) of a tensor `layout` can hold; ValueError otherwise."""
    bad = shape_error(layout, dtype, shape)
    if bad is not None or layout not in REPACKED:
        raise ValueError(bad or f"unknown repacked layout {layout}")
    n = int(shape[1])
    return _Q32[dtype], n, int(shape[0]) // 32, -(-n // ROWS)


def _c16_geometry(dtype: str, shape: tuple[int, ...], layout: str = "q8_0_c16") -> tuple[int, int, int, int]:
    """(rows N, blocks per row, 16-row groups, scale bytes S) of a tensor `layout` ("q8_0_c16" or "iq4_nl_c16", the
    32-element 16-row layouts) can hold; ValueError otherwise."""
    bad = shape_error(layout, dtype, shape)
    if bad is not None:
        raise ValueError(bad)
    nb = int(shape[0]) // 32
    return int(shape[1]), nb, -(-int(shape[1]) // C16), _c16_scales(nb)


def _repack_c16(dtype: str, data: np.ndarray | memoryview | bytes, shape: tuple[int, ...]) -> np.ndarray:
    n, nb, ng, s = _c16_geometry(dtype, shape)
    blocks = np.frombuffer(data, dtype=np.uint8, count=n * nb * 34).reshape(n, nb, 34)
    out = np.zeros((ng, s + 512 * nb), dtype=np.uint8)
    d = np.zeros((ng * C16, nb, 2), dtype=np.uint8)
    d[:n] = blocks[..., :2]
    out[:, :32 * nb] = d.reshape(ng, C16, nb, 2).transpose(0, 2, 1, 3).reshape(ng, 32 * nb)
    q = np.zeros((ng * C16, nb, 32), dtype=np.uint8)
    np.bitwise_xor(blocks[..., 2:], 0x80, out=q[:n])
    # [group][row][block][lane] -> [group][block][lane][row], each a lane's 4 bytes moved as one uint32
    out[:, s:].view("<u4").reshape(ng, nb, 8, C16)[...] = q.view("<u4").reshape(ng, C16, nb, 8).transpose(0, 2, 3, 1)
    return out.reshape(-1)


def _unpack_c16(dtype: str, data: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    n, nb, ng, s = _c16_geometry(dtype, shape)
    groups = np.asarray(data, dtype=np.uint8).reshape(ng, s + 512 * nb)
    out = np.empty((ng * C16, nb, 34), dtype=np.uint8)
    out[..., :2] = groups[:, :32 * nb].reshape(ng, nb, C16, 2).transpose(0, 2, 1, 3).reshape(ng * C16, nb, 2)
    q = groups[:, s:].reshape(ng, nb, 8, C16, 4).transpose(0, 3, 1, 2, 4).reshape(ng * C16, nb, 32)
    out[..., 2:] = q ^ 0x80
    return out[:n].reshape(-1)


def _repack_nl(dtype: str, data: np.ndarray | memoryview | bytes, shape: tuple[int, ...]) -> np.ndarray:
    n, nb, ng, s = _c16_geometry(dtype, shape, "iq4_nl_c16")
    blocks = np.zeros((ng * C16, nb, 18), dtype=np.uint8)
    blocks[:n] = np.frombuffer(data, dtype=np.uint8, count=n * nb * 18).reshape(n, nb, 18)
    out = np.zeros((ng, s + 256 * nb), dtype=np.uint8)
    out[:, :32 * nb] = blocks[..., :2].reshape(ng, C16, nb, 2).transpose(0, 2, 1, 3).reshape(ng, 32 * nb)
    # [group][row][block][dword] -> [group][block][dword][row]
    qs = np.ascontiguousarray(blocks[..., 2:]).view("<u4").reshape(ng, C16, nb, 4)
    out[:, s:].view("<u4").reshape(ng, nb, 4, C16)[...] = qs.transpose(0, 2, 3, 1)
    return out.reshape(-1)


def _unpack_nl(dtype: str, data: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    n, nb, ng, s = _c16_geometry(dtype, shape, "iq4_nl_c16")
    groups = np.asarray(data, dtype=np.uint8).reshape(ng, s + 256 * nb)
    out = np.empty((ng * C16, nb, 18), dtype=np.uint8)
    out[..., :2] = groups[:, :32 * nb].reshape(ng, nb, C16, 2).transpose(0, 2, 1, 3).reshape(ng * C16, nb, 2)
    out[..., 2:] = groups[:, s:].reshape(ng, nb, 4, C16, 4).transpose(0, 3, 1, 2, 4).reshape(ng * C16, nb, 16)
    return out[:n].reshape(-1)


def _q4k_geometry(dtype: str, shape: tuple[int, ...], layout: str = "q4_k_c16") -> tuple[int, int, int]:
    """(rows N, superblocks per row, 16-row groups) of a tensor `layout` (a K-quant "*_c16") can hold;
    ValueError otherwise."""
    bad = shape_error(layout, dtype, shape)
    if bad is not None:
        raise ValueError(bad)
    return int(shape[1]), int(shape[0]) // 256, -(-int(shape[1]) // C16)


def _q4k_scales(sc12: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The 8 six-bit scales and mins (uint8 [..., 8] each) of q4_K's packed 12-byte tables [..., 12]."""
    q = sc12.astype(np.uint8)
    sc = np.empty(q.shape[:-1] + (8,), np.uint8)
    mn = np.empty_like(sc)
    sc[..., :4] = q[..., 0:4] & 63
    mn[..., :4] = q[..., 4:8] & 63
    sc[..., 4:] = (q[..., 8:12] & 0x0F) | ((q[..., 0:4] >> 6) << 4)
    mn[..., 4:] = (q[..., 8:12] >> 4) | ((q[..., 4:8] >> 6) << 4)
    return sc, mn


def _q4k_pack_scales(sc: np.ndarray, mn: np.ndarray) -> np.ndarray:
    """The inverse of _q4k_scales: q4_K's 12-byte tables from 6-bit scales and mins."""
    q = np.empty(sc.shape[:-1] + (12,), np.uint8)
    q[..., 0:4] = (sc[..., :4] & 63) | ((sc[..., 4:] >> 4) << 6)
    q[..., 4:8] = (mn[..., :4] & 63) | ((mn[..., 4:] >> 4) << 6)
    q[..., 8:12] = (sc[..., 4:] & 0x0F) | ((mn[..., 4:] & 0x0F) << 4)
    return q


def _repack_q4k(dtype: str, data: np.ndarray | memoryview | bytes, shape: tuple[int, ...]) -> np.ndarray:
    n, nb, ng = _q4k_geometry(dtype, shape)
    blocks = np.zeros((ng * C16, nb, 144), dtype=np.uint8)
    blocks[:n] = np.frombuffer(data, dtype=np.uint8, count=n * nb * 144).reshape(n, nb, 144)
    out = np.zeros((ng, nb, Q4K_C16_RECORD), dtype=np.uint8)
    # codes: [group][row][block][dword v] -> [group][block][v][row]
    qs = np.ascontiguousarray(blocks[..., 16:]).view("<u4").reshape(ng, C16, nb, 32)
    out[..., :2048].view("<u4").reshape(ng, nb, 32, C16)[...] = qs.transpose(0, 2, 3, 1)
    sc, mn = _q4k_scales(blocks[..., 4:16])  # [group * 16 + row][block][j]
    out[..., 2048:2176] = sc.reshape(ng, C16, nb, 8).transpose(0, 2, 3, 1).reshape(ng, nb, 128)
    out[..., 2176:2304] = mn.reshape(ng, C16, nb, 8).transpose(0, 2, 3, 1).reshape(ng, nb, 128)
    for at, field in ((2304, 0), (2336, 2)):
        out[..., at:at + 32] = blocks[..., field:field + 2].reshape(ng, C16, nb, 2).transpose(0, 2, 1, 3).reshape(ng, nb, 32)
    return out.reshape(-1)


def _unpack_q4k(dtype: str, data: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    n, nb, ng = _q4k_geometry(dtype, shape)
    rec = np.asarray(data, dtype=np.uint8).reshape(ng, nb, Q4K_C16_RECORD)
    out = np.empty((ng, C16, nb, 144), dtype=np.uint8)
    qs = np.ascontiguousarray(rec[..., :2048]).view("<u4").reshape(ng, nb, 32, C16).transpose(0, 3, 1, 2)
    out[..., 16:] = np.ascontiguousarray(qs).view(np.uint8).reshape(ng, C16, nb, 128)
    sc = rec[..., 2048:2176].reshape(ng, nb, 8, C16).transpose(0, 3, 1, 2)
    mn = rec[..., 2176:2304].reshape(ng, nb, 8, C16).transpose(0, 3, 1, 2)
    out[..., 4:16] = _q4k_pack_scales(sc, mn)
    for at, field in ((2304, 0), (2336, 2)):
        out[..., field:field + 2] = rec[..., at:at + 32].reshape(ng, nb, C16, 2).transpose(0, 2, 1, 3)
    return out.reshape(ng * C16, nb * 144)[:n].reshape(-1)


def _repack_q2k(dtype: str, data: np.ndarray | memoryview | bytes, shape: tuple[int, ...]) -> np.ndarray:
    n, nb, ng = _q4k_geometry(dtype, shape, "q2_k_c16")
    blocks = np.zeros((ng * C16, nb, 84), dtype=np.uint8)
    blocks[:n] = np.frombuffer(data, dtype=np.uint8, count=n * nb * 84).reshape(n, nb, 84)
    out = np.zeros((ng, nb, Q2K_C16_RECORD), dtype=np.uint8)
    qs = np.ascontiguousarray(blocks[..., 16:80]).view("<u4").reshape(ng, C16, nb, 16)
    out[..., :1024].view("<u4").reshape(ng, nb, 16, C16)[...] = qs.transpose(0, 2, 3, 1)
    out[..., 1024:1280] = blocks[..., :16].reshape(ng, C16, nb, 16).transpose(0, 2, 3, 1).reshape(ng, nb, 256)
    for at, field in ((1280, 80), (1312, 82)):
        out[..., at:at + 32] = blocks[..., field:field + 2].reshape(ng, C16, nb, 2).transpose(0, 2, 1, 3).reshape(ng, nb, 32)
    return out.reshape(-1)


def _unpack_q2k(dtype: str, data: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    n, nb, ng = _q4k_geometry(dtype, shape, "q2_k_c16")
    rec = np.asarray(data, dtype=np.uint8).reshape(ng, nb, Q2K_C16_RECORD)
    out = np.empty((ng, C16, nb, 84), dtype=np.uint8)
    qs = np.ascontiguousarray(rec[..., :1024]).view("<u4").reshape(ng, nb, 16, C16).transpose(0, 3, 1, 2)
    out[..., 16:80] = np.ascontiguousarray(qs).view(np.uint8).reshape(ng, C16, nb, 64)
    out[..., :16] = rec[..., 1024:1280].reshape(ng, nb, 16, C16).transpose(0, 3, 1, 2)
    for at, field in ((1280, 80), (1312, 82)):
        out[..., field:field + 2] = rec[..., at:at + 32].reshape(ng, nb, C16, 2).transpose(0, 2, 1, 3)
    return out.reshape(ng * C16, nb * 84)[:n].reshape(-1)


def _q3k_scales(sc12: np.ndarray) -> np.ndarray:
    """The 16 signed scales (int8, stored value - 32) of q3_K's 12 packed scale bytes (last axis): scale j's low
    four bits are nibble j // 8 of byte j % 8, its top two bits bits 2 (j // 4) of byte 8 + j % 4."""
    sc12 = sc12.astype(np.int16)
    j = np.arange(16)
    low = np.where(j < 8, sc12[..., j % 8] & 0x0F, sc12[..., j % 8] >> 4)
    top = (sc12[..., 8 + j % 4] >> (2 * (j // 4))) & 3
    return ((low | (top << 4)) - 32).astype(np.int8)


def _q3k_pack_scales(sc: np.ndarray) -> np.ndarray:
    """The inverse of _q3k_scales: 12 packed bytes from 16 signed scales (last axis)."""
    u = (sc.astype(np.int16) + 32).astype(np.uint8)
    out = np.empty(sc.shape[:-1] + (12,), dtype=np.uint8)
    out[..., :8] = (u[..., :8] & 0x0F) | ((u[..., 8:] & 0x0F) << 4)
    top = (u >> 4) & 3
    out[..., 8:] = top[..., 0:4] | (top[..., 4:8] << 2) | (top[..., 8:12] << 4) | (top[..., 12:16] << 6)
    return out


def _repack_q3k(dtype: str, data: np.ndarray | memoryview | bytes, shape: tuple[int, ...]) -> np.ndarray:
    n, nb, ng = _q4k_geometry(dtype, shape, "q3_k_c16")
    blocks = np.zeros((ng * C16, nb, 110), dtype=np.uint8)
    blocks[:n] = np.frombuffer(data, dtype=np.uint8, count=n * nb * 110).reshape(n, nb, 110)
    out = np.zeros((ng, nb, Q3K_C16_RECORD), dtype=np.uint8)
    for at, lo, hi in ((0, 32, 96), (1024, 0, 32)):  # qs, then hmask: dwords [g][b][v][c]
        w = np.ascontiguousarray(blocks[..., lo:hi]).view("<u4").reshape(ng, C16, nb, (hi - lo) // 4)
        out[..., at:at + 16 * (hi - lo)].view("<u4").reshape(ng, nb, (hi - lo) // 4, C16)[...] = w.transpose(0, 2, 3, 1)
    sc = _q3k_scales(blocks[..., 96:108]).view(np.uint8)  # [row][b][j]
    out[..., 1536:1792] = sc.reshape(ng, C16, nb, 16).transpose(0, 2, 3, 1).reshape(ng, nb, 256)
    out[..., 1792:1824] = blocks[..., 108:110].reshape(ng, C16, nb, 2).transpose(0, 2, 1, 3).reshape(ng, nb, 32)
    return out.reshape(-1)


def _unpack_q3k(dtype: str, data: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    n, nb, ng = _q4k_geometry(dtype, shape, "q3_k_c16")
    rec = np.asarray(data, dtype=np.uint8).reshape(ng, nb, Q3K_C16_RECORD)
    out = np.empty((ng, C16, nb, 110), dtype=np.uint8)
    for at, lo, hi in ((0, 32, 96), (1024, 0, 32)):
        w = np.ascontiguousarray(rec[..., at:at + 16 * (hi - lo)]).view("<u4").reshape(ng, nb, (hi - lo) // 4, C16)
        out[..., lo:hi] = np.ascontiguousarray(w.transpose(0, 3, 1, 2)).view(np.uint8).reshape(ng, C16, nb, hi - lo)
    sc = rec[..., 1536:1792].reshape(ng, nb, 16, C16).transpose(0, 3, 1, 2).view(np.int8)
    out[..., 96:108] = _q3k_pack_scales(sc)
    out[..., 108:110] = rec[..., 1792:1824].reshape(ng, nb, C16, 2).transpose(0, 2, 1, 3)
    return out.reshape(ng * C16, nb * 110)[:n].reshape(-1)


def _repack_q6k(dtype: str, data: np.ndarray | memoryview | bytes, shape: tuple[int, ...]) -> np.ndarray:
    n, nb, ng = _q4k_geometry(dtype, shape, "q6_k_c16")
    blocks = np.zeros((ng * C16, nb, 210), dtype=np.uint8)
    blocks[:n] = np.frombuffer(data, dtype=np.uint8, count=n * nb * 210).reshape(n, nb, 210)
    out = np.zeros((ng, nb, Q6K_C16_RECORD), dtype=np.uint8)
    for at, lo, size, word in _Q6K_FIELDS:  # words [g][row][b][v] -> [g][b][v][row]
        w = np.ascontiguousarray(blocks[..., lo:lo + size]).reshape(ng, C16, nb, size // word, word)
        out[..., at:at + C16 * size] = w.transpose(0, 2, 3, 1, 4).reshape(ng, nb, C16 * size)
    return out.reshape(-1)


def _unpack_q6k(dtype: str, data: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    n, nb, ng = _q4k_geometry(dtype, shape, "q6_k_c16")
    rec = np.asarray(data, dtype=np.uint8).reshape(ng, nb, Q6K_C16_RECORD)
    out = np.empty((ng, C16, nb, 210), dtype=np.uint8)
    for at, lo, size, word in _Q6K_FIELDS:
        w = rec[..., at:at + C16 * size].reshape(ng, nb, size // word, C16, word)
        out[..., lo:lo + size] = w.transpose(0, 3, 1, 2, 4).reshape(ng, C16, nb, size)
    return out.reshape(ng * C16, nb * 210)[:n].reshape(-1)


def repack(layout: str, dtype: str, data: np.ndarray | memoryview | bytes, shape: tuple[int, ...]) -> np.ndarray:
    """The bytes of `layout` (uint8, layout_nbytes long) from a tensor's GGUF bytes; shape_error must be None."""
    if layout == "q8_0_c16":
        return _repack_c16(dtype, data, shape)
    if layout == "iq4_nl_c16":
        return _repack_nl(dtype, data, shape)
    if layout == "q4_k_c16":
        return _repack_q4k(dtype, data, shape)
    if layout == "q2_k_c16":
        return _repack_q2k(dtype, data, shape)
    if layout == "q3_k_c16":
        return _repack_q3k(dtype, data, shape)
    if layout == "q6_k_c16":
        return _repack_q6k(dtype, data, shape)
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
    if layout == "q8_0_c16":
        return _unpack_c16(dtype, data, shape)
    if layout == "iq4_nl_c16":
        return _unpack_nl(dtype, data, shape)
    if layout == "q4_k_c16":
        return _unpack_q4k(dtype, data, shape)
    if layout == "q2_k_c16":
        return _unpack_q2k(dtype, data, shape)
    if layout == "q3_k_c16":
        return _unpack_q3k(dtype, data, shape)
    if layout == "q6_k_c16":
        return _unpack_q6k(dtype, data, shape)
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
