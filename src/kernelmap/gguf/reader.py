"""GGUF reader (first stage): a GGUF v2/v3 file -> validated header, lazy metadata and a tensor table.

Every size, count, string and array length is checked with Python ints against the bytes left
before it is used, and tensor extents are checked against the file before any data is touched;
tensor data and large metadata arrays are zero-copy views of a read-only mmap, decoded on demand.
It does not interpret metadata (model config, tokenizer) and never writes files.
"""

from __future__ import annotations

import hashlib
import json
import mmap
import os
import stat
import struct
from array import array
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from kernelmap.errors import GGUFError
from kernelmap.gguf.types import GGML_TYPES, GGMLType, ValueType, ggml_type, type_name, unknown_type_error

__all__ = ["open_gguf", "open_gguf_bytes", "known_sha256", "GGUFFile", "GGUFArray", "TensorInfo"]

MAGIC = b"GGUF"
VERSIONS = (2, 3)
MAX_DIMS = 4
MAX_STRING = 16 << 20  # one metadata string; real chat templates are well under 1 MiB
MAX_KEY = 65535
MAX_TENSOR_NAME = 63  # ggml's GGML_MAX_NAME is 64 including the terminating NUL
MAX_ALIGNMENT = 1 << 20
MAX_ELEMENTS = 1 << 62
DEFAULT_ALIGNMENT = 32
MAX_KV = 1 << 16  # absolute caps: each record is a Python object, so bytes-left alone is not enough
MAX_TENSORS = 1 << 16
_MIN_KV_RECORD = 8 + 1 + 4 + 1  # key length, one key byte, value type, one value byte
_MIN_TENSOR_RECORD = 8 + 1 + 4 + 8 + 4 + 8  # name length, one name byte, n_dims, one dim, type, offset

_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")

# value type -> (struct format, numpy dtype, bytes per element)
_SCALARS: dict[int, tuple[struct.Struct, np.dtype, int]] = {
    ValueType.UINT8: (struct.Struct("<B"), np.dtype("<u1"), 1),
    ValueType.INT8: (struct.Struct("<b"), np.dtype("<i1"), 1),
    ValueType.UINT16: (struct.Struct("<H"), np.dtype("<u2"), 2),
    ValueType.INT16: (struct.Struct("<h"), np.dtype("<i2"), 2),
    ValueType.UINT32: (struct.Struct("<I"), np.dtype("<u4"), 4),
    ValueType.INT32: (struct.Struct("<i"), np.dtype("<i4"), 4),
    ValueType.FLOAT32: (struct.Struct("<f"), np.dtype("<f4"), 4),
    ValueType.BOOL: (struct.Struct("<B"), np.dtype("<u1"), 1),
    ValueType.UINT64: (struct.Struct("<Q"), np.dtype("<u8"), 8),
    ValueType.INT64: (struct.Struct("<q"), np.dtype("<i8"), 8),
    ValueType.FLOAT64: (struct.Struct("<d"), np.dtype("<f8"), 8),
}

# numpy views for the tensor types that are plain arrays
_TENSOR_DTYPES: dict[str, np.dtype] = {
    "f32": np.dtype("<f4"), "f16": np.dtype("<f2"), "f64": np.dtype("<f8"),
    "i8": np.dtype("<i1"), "i16": np.dtype("<i2"), "i32": np.dtype("<i4"), "i64": np.dtype("<i8"),
}


def _has_control(text: str) -> bool:
    """True if `text` holds a C0/C1 control character (names and keys must not)."""
    return any(ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 for c in text)


class _Cursor:
    """Bounded little-endian reader over a buffer; every read checks the bytes left first."""

    __slots__ = ("buf", "pos", "size", "path")

    def __init__(self, buf: Any, size: int, path: str) -> None:
        self.buf = buf
        self.pos = 0
        self.size = size
        self.path = path

    def need(self, n: int, pointer: str, what: str) -> None:
        left = self.size - self.pos
        if n > left:
            raise GGUFError(
                f"truncated: {what} needs {n} bytes at offset {self.pos}, {left} left",
                path=self.path, pointer=pointer, value=n, expected=f"<= {left} bytes",
                hint="the file is truncated or corrupt; download it again",
            )

    def u32(self, pointer: str, what: str) -> int:
        self.need(4, pointer, what)
        (v,) = _U32.unpack_from(self.buf, self.pos)
        self.pos += 4
        return v

    def u64(self, pointer: str, what: str) -> int:
        self.need(8, pointer, what)
        (v,) = _U64.unpack_from(self.buf, self.pos)
        self.pos += 8
        return v

    def string(self, pointer: str, what: str, cap: int) -> str:
        n = self.u64(pointer, what + " length")
        if n > cap:
            raise GGUFError(f"{what} length {n} exceeds the limit", path=self.path, pointer=pointer,
                            value=n, expected=f"<= {cap} bytes")
        self.need(n, pointer, what)
        raw = bytes(self.buf[self.pos:self.pos + n])
        self.pos += n
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise GGUFError(f"{what} is not valid UTF-8 ({exc.reason} at byte {exc.start})",
                            path=self.path, pointer=pointer, value=raw[:40]) from None


class GGUFArray(Sequence):
    """A lazy metadata array: elements are decoded when indexed, never all at open time."""

    __slots__ = ("_file", "key", "element_type", "_count", "_offset", "_starts")

    def __init__(self, file: GGUFFile, key: str, element_type: ValueType, count: int, offset: int,
                 starts: array | None) -> None:
        self._file = file
        self.key = key
        self.element_type = element_type
        self._count = count
        self._offset = offset
        self._starts = starts

    def __len__(self) -> int:
        return self._count

    def __getitem__(self, index):  # type: ignore[override]
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(self._count))]
        if index < 0:
            index += self._count
        if not 0 <= index < self._count:
            raise IndexError(f"metadata array {self.key!r} index out of range")
        if self._starts is not None:
            return self._string(index)
        fmt, _, width = _SCALARS[self.element_type]
        (v,) = fmt.unpack_from(self._file._buffer(), self._offset + index * width)
        return self._scalar(v, index)

    def _scalar(self, v: Any, index: int) -> Any:
        if self.element_type == ValueType.BOOL:
            if v > 1:
                raise GGUFError("bool element is neither 0 nor 1", path=self._file.path,
                                pointer=f"metadata/{self.key}/{index}", value=v, expected="0 or 1")
            return bool(v)
        return v

    def raw(self, index: int) -> bytes:
        """The undecoded bytes of string element `index`."""
        if self._starts is None:
            raise GGUFError("raw() needs a string array", path=self._file.path,
                            pointer=f"metadata/{self.key}", value=self.element_type.name.lower())
        buf = self._file._buffer()
        start = self._starts[index]
        (n,) = _U64.unpack_from(buf, start)
        return bytes(buf[start + 8:start + 8 + n])

    def _string(self, index: int) -> str:
        raw = self.raw(index)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise GGUFError(f"string element is not valid UTF-8 ({exc.reason} at byte {exc.start})",
                            path=self._file.path, pointer=f"metadata/{self.key}/{index}",
                            value=raw[:40]) from None

    def numpy(self) -> np.ndarray:
        """A read-only zero-copy numpy view of a numeric array (bool arrays are checked to be 0/1)."""
        if self._starts is not None:
            raise GGUFError("a string array has no numpy view; use metadata_array()",
                            path=self._file.path, pointer=f"metadata/{self.key}")
        _, dtype, _ = _SCALARS[self.element_type]
        view = np.frombuffer(self._file._mapped(), dtype=dtype, count=self._count, offset=self._offset)
        if self.element_type == ValueType.BOOL:
            if self._count and int(view.max()) > 1:
                bad = int(np.argmax(view > 1))
                raise GGUFError("bool element is neither 0 nor 1", path=self._file.path,
                                pointer=f"metadata/{self.key}/{bad}", value=int(view[bad]),
                                expected="0 or 1")
            view = view.view(np.bool_)
        return view

    def tolist(self) -> list:
        """All elements as Python values (strings decoded and checked)."""
        if self._starts is None:
            return self.numpy().tolist()
        buf = self._file._buffer()
        unpack = _U64.unpack_from
        out: list[str] = []
        append = out.append
        try:
            for start in self._starts:
                (n,) = unpack(buf, start)
                append(str(buf[start + 8:start + 8 + n], "utf-8"))
        except UnicodeDecodeError:
            self._string(len(out))  # raises GGUFError naming the element
        return out

    def __iter__(self) -> Iterator:
        for i in range(self._count):
            yield self[i]

    def __repr__(self) -> str:
        return f"GGUFArray({self.key!r}, {self.element_type.name.lower()}, len={self._count})"


class TensorInfo:
    """One tensor record: name, GGML type, shape in GGUF order (ne0 first = row length), extent.

    `offset` is absolute in the file. For a type id kernelmap does not know, `type_name` is
    `unknown:<id>` and `n_bytes`, `block_size` and `type_size` raise GGUFError.
    """

    __slots__ = ("name", "index", "ggml_type", "type_name", "shape", "n_elements", "offset", "_n_bytes",
                 "_path")

    def __init__(self, name: str, index: int, ggml_type_id: int, shape: tuple[int, ...],
                 n_elements: int, offset: int, n_bytes: int | None, path: str) -> None:
        self.name = name
        self.index = index
        self.ggml_type = ggml_type_id
        self.type_name = type_name(ggml_type_id)
        self.shape = shape
        self.n_elements = n_elements
        self.offset = offset
        self._n_bytes = n_bytes
        self._path = path

    @property
    def known_type(self) -> GGMLType:
        """The table entry of this tensor's type (GGUFError if the type id is unknown)."""
        return ggml_type(self.ggml_type, tensor=self.name, path=self._path)

    @property
    def n_bytes(self) -> int:
        if self._n_bytes is None:
            raise unknown_type_error(self.ggml_type, tensor=self.name, path=self._path)
        return self._n_bytes

    @property
    def block_size(self) -> int:
        return self.known_type.block_size

    @property
    def type_size(self) -> int:
        return self.known_type.type_size

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready summary (n_bytes is null for an unknown type)."""
        return {"name": self.name, "type": self.type_name, "ggml_type": self.ggml_type,
                "shape": list(self.shape), "n_elements": self.n_elements, "offset": self.offset,
                "n_bytes": self._n_bytes}

    def __repr__(self) -> str:
        return f"TensorInfo({self.name!r}, {self.type_name}, shape={self.shape}, offset={self.offset})"


class _Metadata(Mapping):
    """Read-only view of the key/value section: scalars as Python values, arrays as GGUFArray."""

    __slots__ = ("_values",)

    def __init__(self, values: dict[str, Any]) -> None:
        self._values = values

    def __getitem__(self, key: str) -> Any:
        return self._values[key][1]

    def value_type(self, key: str) -> str:
        """The GGUF value type of `key` as stored: `uint32`, `string`, `array of float32` (KeyError if absent)."""
        types = self._values[key][0]
        return " of ".join(t.name.lower() for t in types)

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)


class GGUFFile:
    """A validated GGUF file: header, lazy metadata, tensor table, zero-copy tensor data."""

    def __init__(self, buf: Any, size: int, path: str, fh: Any = None) -> None:
        self.path = path
        self.size = size
        self._buf = buf
        self._fh = fh
        self._sha256: str | None = None
        self._values: dict[str, tuple[tuple[ValueType, ...], Any]] = {}
        self._tensors: dict[str, TensorInfo] = {}
        self._seen_names: set[str] = set()
        self._parse()
        self.metadata: Mapping[str, Any] = _Metadata(self._values)
        self.tensors: Mapping[str, TensorInfo] = _FrozenDict(self._tensors)

    # ---- parsing -------------------------------------------------------------------------------

    def _error(self, message: str, pointer: str, **fields: Any) -> GGUFError:
        return GGUFError(message, path=self.path, pointer=pointer, **fields)

    def _parse(self) -> None:
        cur = _Cursor(self._buf, self.size, self.path)
        cur.need(4, "header/magic", "magic")
        magic = bytes(self._buf[0:4])
        if magic != MAGIC:
            raise self._error("bad magic: not a GGUF file", "header/magic", value=magic, expected='"GGUF"')
        cur.pos = 4
        version = cur.u32("header/version", "version")
        if version not in VERSIONS:
            swapped = int.from_bytes(version.to_bytes(4, "little"), "big")
            hint = ("this looks like a big-endian GGUF, which is not supported" if swapped in VERSIONS
                    else "GGUF v1 files predate 64-bit counts; reconvert the model" if version == 1 else None)
            raise self._error("unsupported GGUF version", "header/version", value=version,
                              expected="2 or 3", hint=hint)
        self.version = version
        n_tensors = cur.u64("header/n_tensors", "tensor count")
        n_kv = cur.u64("header/n_kv", "metadata count")
        left = self.size - cur.pos
        if n_kv > MAX_KV:
            raise self._error("metadata count exceeds the limit", "header/n_kv", value=n_kv, expected=f"<= {MAX_KV}")
        if n_tensors > MAX_TENSORS:
            raise self._error("tensor count exceeds the limit", "header/n_tensors", value=n_tensors,
                              expected=f"<= {MAX_TENSORS}")
        if n_kv > left // _MIN_KV_RECORD:
            raise self._error("metadata count exceeds what the file can hold", "header/n_kv", value=n_kv,
                              expected=f"<= {left // _MIN_KV_RECORD} for {left} bytes left")
        if n_tensors > left // _MIN_TENSOR_RECORD:
            raise self._error("tensor count exceeds what the file can hold", "header/n_tensors",
                              value=n_tensors, expected=f"<= {left // _MIN_TENSOR_RECORD} for {left} bytes left")
        for i in range(n_kv):
            self._parse_kv(cur, i)
        self.alignment = self._read_alignment()
        infos = [self._parse_tensor_info(cur, i) for i in range(n_tensors)]
        pad = (-cur.pos) % self.alignment
        self.data_offset = cur.pos + pad
        self._place_tensors(infos)

    def _parse_kv(self, cur: _Cursor, i: int) -> None:
        key = cur.string(f"metadata[{i}]/key", "key", MAX_KEY)
        if not key or _has_control(key):
            raise self._error("key is empty or holds control characters", f"metadata[{i}]/key", value=key)
        pointer = f"metadata/{key}"
        if key in self._values:
            raise self._error("duplicate metadata key", pointer, value=key, expected="unique keys")
        vtype = cur.u32(pointer + "/type", "value type")
        if vtype not in ValueType._value2member_map_:
            raise self._error("unknown value type", pointer + "/type", value=vtype, expected="0..12")
        vtype = ValueType(vtype)
        if vtype == ValueType.STRING:
            self._values[key] = ((vtype,), cur.string(pointer, "string value", MAX_STRING))
        elif vtype == ValueType.ARRAY:
            self._values[key] = self._parse_array(cur, key, pointer)
        else:
            fmt, _, width = _SCALARS[vtype]
            cur.need(width, pointer, "value")
            (v,) = fmt.unpack_from(self._buf, cur.pos)
            cur.pos += width
            if vtype == ValueType.BOOL:
                if v > 1:
                    raise self._error("bool value is neither 0 nor 1", pointer, value=v, expected="0 or 1")
                v = bool(v)
            self._values[key] = ((vtype,), v)

    def _parse_array(self, cur: _Cursor, key: str, pointer: str) -> tuple[tuple[ValueType, ...], GGUFArray]:
        etype = cur.u32(pointer + "/element_type", "array element type")
        if etype == ValueType.ARRAY:
            raise self._error("nested arrays are not supported", pointer + "/element_type", value="array",
                              expected="a scalar or string element type")
        if etype not in ValueType._value2member_map_:
            raise self._error("unknown array element type", pointer + "/element_type", value=etype,
                              expected="0..12 except 9")
        etype = ValueType(etype)
        count = cur.u64(pointer + "/count", "array count")
        left = self.size - cur.pos
        if etype == ValueType.STRING:
            if count > left // 8:
                raise self._error("array count exceeds the bytes left", pointer + "/count", value=count,
                                  expected=f"<= {left // 8} strings for {left} bytes left")
            starts = self._scan_strings(cur, count, pointer)
            return (ValueType.ARRAY, etype), GGUFArray(self, key, etype, count, 0, starts)
        width = _SCALARS[etype][2]
        nbytes = count * width
        if nbytes > left:
            raise self._error("array count times element size exceeds the bytes left", pointer + "/count",
                              value=count, expected=f"<= {left // width} elements of {width} bytes")
        offset = cur.pos
        cur.pos += nbytes
        return (ValueType.ARRAY, etype), GGUFArray(self, key, etype, count, offset, None)

    def _scan_strings(self, cur: _Cursor, count: int, pointer: str) -> array:
        """Walk `count` length-prefixed strings; return where each starts (its length prefix)."""
        buf = self._buf
        unpack = _U64.unpack_from
        end = self.size
        pos = cur.pos
        starts = array("Q", bytes(8 * count))
        for i in range(count):
            if end - pos < 8:
                cur.pos = pos
                cur.need(8, f"{pointer}/{i}", "string length")
            (n,) = unpack(buf, pos)
            starts[i] = pos
            pos += 8
            if n > end - pos or n > MAX_STRING:
                raise self._error("string length runs past the end of the file", f"{pointer}/{i}", value=n,
                                  expected=f"<= {min(end - pos, MAX_STRING)} bytes")
            pos += n
        cur.pos = pos
        return starts

    def _read_alignment(self) -> int:
        entry = self._values.get("general.alignment")
        if entry is None:
            return DEFAULT_ALIGNMENT
        types, value = entry
        if types != (ValueType.UINT32,):
            raise self._error("general.alignment has the wrong type", "metadata/general.alignment",
                              value="/".join(t.name.lower() for t in types), expected="uint32")
        if value < 1 or value & (value - 1) or value > MAX_ALIGNMENT:
            raise self._error("general.alignment is not a power of two in range",
                              "metadata/general.alignment", value=value,
                              expected=f"a power of two in 1..{MAX_ALIGNMENT}")
        return value

    def _parse_tensor_info(self, cur: _Cursor, i: int) -> tuple[str, int, tuple[int, ...], int, int]:
        base = f"tensor[{i}]"
        name = cur.string(base + "/name", "tensor name", MAX_TENSOR_NAME)
        if not name or _has_control(name):
            raise self._error("tensor name is empty or holds control characters", base + "/name", value=name)
        if name in self._seen_names:
            raise self._error("duplicate tensor name", base + "/name", value=name, expected="unique names")
        n_dims = cur.u32(base + "/n_dims", "dimension count")
        if not 1 <= n_dims <= MAX_DIMS:
            raise self._error("tensor dimension count out of range", base + "/n_dims", value=n_dims,
                              expected=f"1..{MAX_DIMS}")
        cur.need(8 * n_dims, base + "/dims", "dimensions")
        shape = struct.unpack_from(f"<{n_dims}Q", self._buf, cur.pos)
        cur.pos += 8 * n_dims
        n = 1
        for d in shape:
            if d < 1:
                raise self._error(f"tensor {name!r} has a zero dimension", base + "/dims", value=list(shape),
                                  expected="every dimension >= 1")
            n *= d
        if n > MAX_ELEMENTS:
            raise self._error(f"tensor {name!r} element count overflows", base + "/dims", value=n,
                              expected="<= 2^62 elements")
        type_id = cur.u32(base + "/type", "tensor type")
        rel = cur.u64(base + "/offset", "tensor offset")
        self._seen_names.add(name)
        return name, type_id, shape, n, rel

    def _place_tensors(self, infos: list[tuple[str, int, tuple[int, ...], int, int]]) -> None:
        """Check each tensor's type geometry and extent, then check extents do not overlap."""
        extents: list[tuple[int, int, str]] = []
        sizes: dict[str, int | None] = {}
        for i, (name, type_id, shape, n, rel) in enumerate(infos):
            base = f"tensor[{i}]"
            known = GGML_TYPES.get(type_id)
            nbytes: int | None = None
            if known is not None:
                if shape[0] % known.block_size:
                    raise self._error(f"tensor {name!r} row length is not a multiple of the {known.name} "
                                      f"block size", base + "/dims", value=shape[0],
                                      expected=f"a multiple of {known.block_size}")
                nbytes = n // known.block_size * known.type_size
            if rel % self.alignment:
                raise self._error(f"tensor {name!r} data offset is misaligned", base + "/offset", value=rel,
                                  expected=f"a multiple of {self.alignment}")
            start = self.data_offset + rel
            end = start + (nbytes if nbytes is not None else 0)
            if end > self.size or (nbytes is None and start >= self.size):
                raise self._error(f"tensor {name!r} data runs past the end of the file", base + "/offset",
                                  value=rel, expected=f"data end <= file size {self.size}",
                                  hint="the file is truncated or corrupt; download it again")
            extents.append((start, end, name))
            sizes[name] = nbytes
            self._tensors[name] = TensorInfo(name, i, type_id, tuple(shape), n, start, nbytes, self.path)
        extents.sort()
        for (s0, e0, n0), (s1, _e1, n1) in zip(extents, extents[1:], strict=False):
            if s1 < e0 or s1 == s0:
                raise self._error(f"tensor {n1!r} data overlaps tensor {n0!r}",
                                  f"tensor[{self._tensors[n1].index}]/offset", value=s1 - self.data_offset,
                                  expected=f">= {e0 - self.data_offset}")
            info = self._tensors[n0]
            padded = e0 + (-(e0 - self.data_offset)) % self.alignment
            if sizes[n0] is not None and s1 > padded:  # tensors are packed: a larger region means another size
                raise self._error(f"tensor {n0!r} is {sizes[n0]} bytes by its type and shape but its data "
                                  f"region holds {s1 - s0} bytes before tensor {n1!r}",
                                  f"tensor[{info.index}]/dims", value=list(info.shape),
                                  expected=f"a {info.type_name} shape of {s1 - s0} bytes (padded to "
                                           f"{self.alignment})",
                                  hint="the tensor's type or shape does not match its data; the file is corrupt")

    # ---- access --------------------------------------------------------------------------------

    def _buffer(self) -> Any:
        if self._buf is None:
            raise GGUFError("file is closed", path=self.path, pointer="")
        return self._buf

    def _mapped(self) -> Any:
        """The buffer, after checking the file has not shrunk under the mapping (SIGBUS otherwise)."""
        buf = self._buffer()
        if self._fh is not None:
            now = os.fstat(self._fh.fileno()).st_size
            if now < self.size:
                raise GGUFError("file shrank after it was opened", path=self.path, pointer="",
                                value=now, expected=f"{self.size} bytes",
                                hint="another process is rewriting the model file; wait and retry")
        return buf

    def _tensor(self, name: str) -> TensorInfo:
        info = self._tensors.get(name)
        if info is None:
            raise GGUFError("no such tensor", path=self.path, pointer=f"tensors/{name}", value=name)
        return info

    def _entry(self, key: str) -> tuple[tuple[ValueType, ...], Any]:
        entry = self._values.get(key)
        if entry is None:
            raise GGUFError("key not found", path=self.path, pointer=f"metadata/{key}", value=key)
        return entry

    def metadata_types(self, key: str) -> tuple[ValueType, ...]:
        """The value type of `key`: `(UINT32,)` for a scalar, `(ARRAY, STRING)` for a string array."""
        return self._entry(key)[0]

    def metadata_array(self, key: str) -> list[str] | np.ndarray:
        """A whole array value: list of str for string arrays, a read-only numpy view otherwise."""
        types, value = self._entry(key)
        if types[0] != ValueType.ARRAY:
            raise GGUFError("value is not an array", path=self.path, pointer=f"metadata/{key}",
                            value=types[0].name.lower(), expected="array")
        if value.element_type == ValueType.STRING:
            return value.tolist()
        return value.numpy()

    def tensor_data(self, name: str) -> np.ndarray:
        """The raw bytes of tensor `name` as a read-only zero-copy numpy uint8 view."""
        info = self._tensor(name)
        return np.frombuffer(self._mapped(), dtype=np.uint8, count=info.n_bytes, offset=info.offset)

    def tensor_array(self, name: str) -> np.ndarray:
        """A zero-copy numpy view of a plain (f32/f16/f64/i8..i64) tensor, shaped in numpy order (ne0 last)."""
        info = self._tensor(name)
        dtype = _TENSOR_DTYPES.get(info.type_name)
        if dtype is None:
            if info.type_name.startswith("unknown:"):
                raise unknown_type_error(info.ggml_type, tensor=name, path=self.path)
            raise GGUFError(f"tensor {name!r} is block-quantized; use tensor_data() for its bytes",
                            path=self.path, pointer=f"tensors/{name}/type", value=info.type_name,
                            expected=", ".join(_TENSOR_DTYPES))
        view = np.frombuffer(self._mapped(), dtype=dtype, count=info.n_elements, offset=info.offset)
        return view.reshape(tuple(reversed(info.shape)))

    def sha256(self) -> str:
        """SHA-256 of the whole file's bytes, cached by file identity (see `_sha256_cache_key`)."""
        if self._sha256 is None:
            self._sha256 = _cached_sha256(self)
        return self._sha256

    def close(self) -> None:
        """Release the mapping (views handed out keep it alive until they are dropped)."""
        buf, self._buf = self._buf, None
        if isinstance(buf, mmap.mmap):
            try:
                buf.close()
            except BufferError:
                pass
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def __enter__(self) -> GGUFFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"GGUFFile({self.path!r}, v{self.version}, {len(self._values)} keys, "
                f"{len(self._tensors)} tensors)")


class _FrozenDict(Mapping):
    """A read-only mapping that keeps insertion order."""

    __slots__ = ("_d",)

    def __init__(self, d: dict) -> None:
        self._d = d

    def __getitem__(self, key: Any) -> Any:
        return self._d[key]

    def __iter__(self) -> Iterator:
        return iter(self._d)

    def __len__(self) -> int:
        return len(self._d)


def open_gguf(path: str | os.PathLike[str]) -> GGUFFile:
    """Open and validate a GGUF file (mmap-backed); raise GGUFError naming the file and field."""
    shown = str(path)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise GGUFError(f"cannot open: {exc.strerror}", path=shown, pointer="") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise GGUFError("not a regular file", path=shown, pointer="")
        mm = mmap.mmap(fd, st.st_size, access=mmap.ACCESS_READ) if st.st_size else None
    except BaseException:
        os.close(fd)
        raise
    if mm is None:
        os.close(fd)
        return GGUFFile(b"", 0, shown)
    fh = os.fdopen(fd, "rb", buffering=0)  # kept open to re-check the size before handing out views
    try:
        return GGUFFile(mm, st.st_size, shown, fh)
    except BaseException:
        mm.close()
        fh.close()
        raise


def open_gguf_bytes(data: bytes | bytearray | memoryview, name: str = "<bytes>") -> GGUFFile:
    """Validate an in-memory GGUF image (tests, fuzzing); `name` stands in for the path in errors."""
    buf = bytes(data)
    return GGUFFile(buf, len(buf), name)


def _sha256_cache_key(path: str) -> dict[str, Any]:
    """File identity for the hash cache: real path, device, inode, size, mtime and ctime in ns."""
    st = os.stat(path)
    return {"path": os.path.realpath(path), "dev": st.st_dev, "ino": st.st_ino, "size": st.st_size,
            "mtime_ns": st.st_mtime_ns, "ctime_ns": st.st_ctime_ns}


def _hash_buffer(buf: Any, size: int) -> str:
    h = hashlib.sha256()
    view = memoryview(buf)
    step = 16 << 20
    for start in range(0, size, step):
        h.update(view[start:start + step])
    view.release()
    return h.hexdigest()


def _sha256_entry(ident: dict[str, Any]) -> Path:
    from kernelmap.build.driver import cache_dir

    blob = json.dumps(ident, sort_keys=True).encode()
    return cache_dir() / "gguf_sha256" / (hashlib.sha256(blob).hexdigest()[:32] + ".json")


def _cache_lookup(ident: dict[str, Any]) -> str | None:
    try:
        cached = json.loads(_sha256_entry(ident).read_text())
        if cached.get("identity") == ident and isinstance(cached.get("sha256"), str):
            return cached["sha256"]
    except (OSError, ValueError):
        pass
    return None


def known_sha256(path: str | os.PathLike[str]) -> str | None:
    """The SHA-256 a previous hash of this file recorded for its current identity (`_sha256_cache_key`), or None
    (never hashed, changed since, or no cache): a lookup only, nothing is read or hashed."""
    try:
        return _cache_lookup(_sha256_cache_key(os.fspath(path)))
    except OSError:
        return None


def _cached_sha256(f: GGUFFile) -> str:
    """Hash the file, reusing a result cached under the user cache dir for the same file identity.

    The cache is an optimisation only: if it cannot be read or written the hash is recomputed.
    A file rewritten in place keeps its inode but changes mtime/ctime, so the key changes too.
    """
    if not isinstance(f._buf, mmap.mmap):
        return _hash_buffer(f._buffer(), f.size)
    f._mapped()
    try:
        ident = _sha256_cache_key(f.path)
    except OSError:
        return _hash_buffer(f._buffer(), f.size)
    cached = _cache_lookup(ident)
    if cached is not None:
        return cached
    digest = _hash_buffer(f._buffer(), f.size)
    _write_cache_entry(_sha256_entry(ident), {"identity": ident, "sha256": digest})
    return digest


def _write_cache_entry(entry: Path, record: dict[str, Any]) -> None:
    """Write `record` to `entry` atomically (temp file + rename); failures are ignored."""
    try:
        entry.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = entry.with_name(f".{entry.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(record, sort_keys=True))
        os.replace(tmp, entry)
    except OSError:
        pass
