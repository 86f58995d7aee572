"""Differential oracle for the GGUF reader: our reader and gguf-py's GGUFReader on the same image.

`judge(image, oracle)` reads one image with both readers and returns an outcome code: "both-accept"
(the two read back the same metadata keys, value types, values and tensor table), "both-refuse", or
the code of one entry of REFUSED_BY_US_ONLY / ACCEPTED_BY_US_ONLY, the explicit lists of the places
where the two readers differ and why ours is right. An asymmetry counts only when the refusing
reader's error says so and its evidence shows in what the accepting reader read (e.g. "tensors
overlap" needs gguf-py's own tensor table to show the overlap); anything else raises Disagreement
naming what differs.

"Accept" means more than "opens": every metadata value is decoded (string arrays, bool arrays) and
every tensor's bytes are read, on both sides. gguf-py reads past the end of the file silently (numpy
slices stop at the end); the oracle reads through `_StrictReader`, which turns a short read into a
refusal, and nothing else in gguf-py's reader is changed.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import gguf
from kernelmap.errors import GGUFError
from kernelmap.gguf.reader import (
    MAX_ALIGNMENT,
    MAX_DIMS,
        MAX_TENSOR_NAME,
    GGUFArray,
    open_gguf_bytes,
)
from kernelmap.gguf.types import GGML_TYPES, ValueType

__all__ = ["ACCEPTED_BY_US_ONLY", "REFUSED_BY_US_ONLY", "Asymmetry", "Disagreement", "Oracle", "Readout", "judge",
           "read_ours"]

_PSEUDO_FIELDS = 3  # gguf-py puts GGUF.version, GGUF.tensor_count and GGUF.kv_count first in `fields`
_VALID_VALUE_TYPES = {int(t) for t in ValueType}


class Disagreement(AssertionError):
    """The readers differ in a way no REFUSED_BY_US_ONLY entry explains."""


class _StrictReader(gguf.GGUFReader):
    """gguf-py's reader, except that a read running past the end of the file raises (it never does there)."""

    def _get(self, offset, dtype, count=1, override_order=None):  # noqa: ANN001, ANN202 (gguf-py's signature)
        arr = super()._get(offset, dtype, count, override_order)
        if len(arr) != int(count):
            raise EOFError(f"read of {int(count)} items at offset {offset} runs past the end of the file")
        return arr


def _norm(value: Any) -> Any:
    """A comparable form of a metadata value: floats by their bits (NaN, -0.0), lists element-wise."""
    if isinstance(value, float):
        return ("float", struct.pack("<d", value))
    if isinstance(value, list):
        return [_norm(v) for v in value]
    return (type(value).__name__, value)


@dataclass
class Readout:
    """Everything one reader read from an image (None fields are what that reader cannot know)."""

    keys: list[str]
    types: dict[str, tuple[int, ...]]
    values: dict[str, Any]
    tensors: list[dict[str, Any]]
    alignment: int
    extra: dict[str, Any] = field(default_factory=dict)  # gguf-py only: raw facts the asymmetries look at


def read_ours(image: bytes) -> Readout | GGUFError:
    """Our reader's full readout, or the GGUFError it refused with (any other exception propagates)."""
    try:
        f = open_gguf_bytes(image, name="mutant.gguf")
        keys = list(f.metadata)
        types = {k: tuple(int(t) for t in f.metadata_types(k)) for k in keys}
        values = {}
        for k in keys:
            v = f.metadata[k]
            values[k] = _norm(v.tolist() if isinstance(v, GGUFArray) else v)
        tensors = []
        for name, info in f.tensors.items():
            known = info.ggml_type in GGML_TYPES
            tensors.append({"name": name, "type": info.ggml_type, "shape": tuple(info.shape),
                            "n_elements": info.n_elements, "n_bytes": info.n_bytes if known else None,
                            "offset": info.offset, "data": bytes(f.tensor_data(name)) if known else None})
        return Readout(keys, types, values, tensors, f.alignment)
    except GGUFError as exc:
        return exc


class Oracle:
    """gguf-py's reader over an in-memory file (a memfd on Linux, else a temporary file)."""

    def __init__(self, scratch_dir: str) -> None:
        if hasattr(os, "memfd_create"):
            self._fh = os.fdopen(os.memfd_create("gguf-mutant"), "w+b", buffering=0)
        else:
            self._fh = open(os.path.join(scratch_dir, "mutant.gguf"), "w+b", buffering=0)  # noqa: SIM115

    def close(self) -> None:
        self._fh.close()

    def read(self, image: bytes) -> Readout | Exception:
        """gguf-py's full readout of `image`, or the exception it refused with."""
        self._fh.seek(0)
        self._fh.truncate(0)
        self._fh.write(image)
        self._fh.flush()
        try:
            with np.errstate(all="ignore"):  # gguf-py's uint64 offset sum may wrap (see "offset-wraps")
                return _their_readout(_StrictReader(self._fh))
        except Exception as exc:  # noqa: BLE001 - any exception is gguf-py refusing the image
            return exc


def _their_readout(r: gguf.GGUFReader) -> Readout:
    fields = list(r.fields.values())[_PSEUDO_FIELDS:]
    keys = [f.name for f in fields]
    types = {f.name: tuple(int(t) for t in f.types) for f in fields}
    values = {f.name: _norm(f.contents()) for f in fields}
    bools_over_1 = False
    empty_array_etypes: list[int] = []
    nested = False
    for f in fields:
        if int(f.types[0]) == ValueType.ARRAY:
            if len(f.types) == 1:  # gguf-py records no element type for an empty array
                empty_array_etypes.append(int(f.parts[3][0]))
            nested |= any(int(t) == ValueType.ARRAY for t in f.types[1:])
        if ValueType.BOOL in [int(t) for t in f.types]:
            bools_over_1 |= any(int(f.parts[i].view(np.uint8).max(initial=0)) > 1 for i in f.data)
    tensors = []
    for t in r.tensors:
        data = np.asarray(t.data).reshape(-1).view(np.uint8)
        tensors.append({"name": t.name, "type": int(t.tensor_type), "shape": tuple(int(d) for d in t.shape),
                        "n_elements": int(t.n_elements), "n_bytes": int(t.n_bytes), "offset": int(t.data_offset),
                        "data": bytes(data)})
    return Readout(keys, types, values, tensors, int(r.alignment),
                   {"byte_order": r.byte_order, "data_offset": int(r.data_offset), "bools_over_1": bools_over_1, "nested": nested,
                    "empty_array_etypes": empty_array_etypes})


@dataclass(frozen=True)
class Asymmetry:
    """One allowed difference: `refusal` is in the refusing reader's error, `evidence` holds on the other's readout."""

    code: str
    reason: str
    refusal: str  # substring of the refusing reader's error message
    evidence: Callable[[Readout], bool]


def _names(r: Readout) -> list[str]:
    return [t["name"] for t in r.tensors]


def _has_control(text: str) -> bool:
    return any(ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 for c in text)


def _gap(r: Readout) -> bool:
    """A tensor whose data region (up to the next tensor) is longer than its type and shape, padded."""
    base, al = r.extra["data_offset"], r.alignment
    ext = sorted((t["offset"], t["offset"] + t["n_bytes"]) for t in r.tensors)
    return any(s1 > e0 + (-(e0 - base)) % al for (_s0, e0), (s1, _) in zip(ext, ext[1:], strict=False))


def _overlap(r: Readout) -> bool:
    ext = sorted((t["offset"], t["offset"] + t["n_bytes"]) for t in r.tensors)
    return any(s1 < e0 or s1 == s0 for (s0, e0), (s1, _) in zip(ext, ext[1:], strict=False))


# Where gguf-py (0.19) accepts an image that our reader refuses, and why refusing is right. Every entry
# names the llama.cpp 0.3.36 rule (ggml/src/gguf.cpp) or the kernelmap rule it follows, and
# test_reader_fuzz.py builds one image per entry. Element counts above 2^62 and row lengths that are not
# a multiple of the block size are refused by both readers (gguf-py fails to shape the data), so they
# need no entry.
REFUSED_BY_US_ONLY: tuple[Asymmetry, ...] = (
    Asymmetry("key-control", "a metadata key that is empty or holds control characters reaches terminals and "
              "error lines; kernelmap refuses it (gguf-py keeps any key)",
              "key is empty or holds control characters",
              lambda r: any(not k or _has_control(k) for k in r.keys)),
    Asymmetry("name-control", "a tensor name that is empty or holds control characters (same reason as keys)",
              "tensor name is empty or holds control characters",
              lambda r: any(not n or _has_control(n) for n in _names(r))),
    Asymmetry("name-length", f"a tensor name longer than {MAX_TENSOR_NAME} bytes: llama.cpp refuses it "
              "(GGML_MAX_NAME is 64 with the NUL); gguf-py has no limit",
              "tensor name length",
              lambda r: any(len(n.encode()) > MAX_TENSOR_NAME for n in _names(r))),
    Asymmetry("bool-not-0-1", "a bool byte other than 0 or 1 is corruption; gguf-py reads any byte as a bool",
              "is neither 0 nor 1", lambda r: r.extra["bools_over_1"]),
    Asymmetry("nested-array", "arrays of arrays: llama.cpp refuses them, gguf-py reads them flattened",
              "nested arrays are not supported",
              lambda r: r.extra["nested"] or ValueType.ARRAY in r.extra["empty_array_etypes"]),
    Asymmetry("empty-array-bad-type", "an empty array whose element type id is not a GGUF type: gguf-py never "
              "looks at the element type of an empty array, llama.cpp refuses an unknown type",
              "unknown array element type",
              lambda r: any(t not in _VALID_VALUE_TYPES for t in r.extra["empty_array_etypes"])),
    Asymmetry("alignment-range", f"general.alignment above {MAX_ALIGNMENT} bytes: kernelmap caps it (a power of two "
              "gguf-py and llama.cpp accept can pad the data section by up to 2 GiB)",
              "general.alignment is not a power of two in range", lambda r: r.alignment > MAX_ALIGNMENT),
    Asymmetry("n-dims", f"a tensor with 0 or more than {MAX_DIMS} dimensions: llama.cpp refuses it "
              "(GGML_MAX_DIMS), gguf-py reads any count", "tensor dimension count out of range",
              lambda r: any(not 1 <= len(t["shape"]) <= MAX_DIMS for t in r.tensors)),
    Asymmetry("zero-dim", "a dimension of 0: an empty tensor has no data and shares its offset with the next "
              "one; kernelmap refuses it (gguf-py and llama.cpp keep it)", "has a zero dimension",
              lambda r: any(0 in t["shape"] for t in r.tensors)),
    Asymmetry("misaligned-offset", "a tensor offset that is not a multiple of general.alignment: llama.cpp "
              "refuses it, gguf-py does not check", "data offset is misaligned",
              lambda r: any((t["offset"] - r.extra["data_offset"]) % r.alignment for t in r.tensors)),
    Asymmetry("tensor-overlap", "two tensors whose bytes overlap (or that start at one offset): llama.cpp "
              "requires each tensor to start where the previous one ends, gguf-py does not check",
              "data overlaps", _overlap),
    Asymmetry("tensor-gap", "a tensor whose data region up to the next tensor is longer than its type and shape "
              "give (padded): the same llama.cpp rule (each tensor starts where the previous one ends), so the type "
              "or shape is wrong; gguf-py does not check", "by its type and shape but its data region holds", _gap),
    Asymmetry("offset-wraps", "a tensor offset near 2^64: gguf-py adds it to the data start in uint64 numpy "
              "arithmetic, which wraps around to an earlier place in the file; llama.cpp and kernelmap refuse it",
              "data runs past the end of the file", lambda r: any(t["offset"] < r.extra["data_offset"]
                                                                  for t in r.tensors)),
    Asymmetry("big-endian", "gguf-py reads a byte-swapped (big-endian) GGUF; kernelmap supports little-endian "
              "files only and says so", "unsupported GGUF version", lambda r: r.extra["byte_order"] == "S"),
)

_GGUF_PY_TYPES = frozenset(int(t) for t in gguf.GGML_QUANT_SIZES)


def _unknown_to_both(r: Readout) -> bool:
    return any(t["n_bytes"] is None and t["type"] not in _GGUF_PY_TYPES for t in r.tensors)


def _newer_than_ours(r: Readout) -> bool:
    return any(t["n_bytes"] is None and t["type"] in _GGUF_PY_TYPES for t in r.tensors)


# Where our reader accepts and gguf-py refuses (evidence: our own readout and gguf-py's error).
ACCEPTED_BY_US_ONLY: tuple[Asymmetry, ...] = (
    Asymmetry("unknown-type-kept", "a tensor type id no GGML table lists: kernelmap keeps the tensor as "
              "unknown:<id> (`kernelmap inspect` lists it; asking for its byte size is an error naming the "
              "tensor), gguf-py's type enum refuses the id", "is not a valid GGMLQuantizationType", _unknown_to_both),
    Asymmetry("type-newer-than-kernelmap", "a type id added to ggml after llama.cpp 0.3.36 (gguf-py 0.19 knows "
              "it, kernelmap's table does not): kernelmap keeps it as unknown:<id> without a byte size, so it "
              "cannot check that type's block geometry, which gguf-py refuses", "block size", _newer_than_ours),
)


def judge(image: bytes, oracle: Oracle) -> str:
    """The outcome code of one image (see the module docstring); raises Disagreement otherwise."""
    ours = read_ours(image)
    theirs = oracle.read(image)
    ours_ok = isinstance(ours, Readout)
    theirs_ok = isinstance(theirs, Readout)
    if not ours_ok and not theirs_ok:
        return "both-refuse"
    if ours_ok and theirs_ok:
        return _compare(ours, theirs)
    if not ours_ok:
        message = ours.message
        for a in REFUSED_BY_US_ONLY:
            if a.refusal in message and a.evidence(theirs):
                return a.code
        raise Disagreement(f"our reader refuses ({ours}) but gguf-py reads the image and no allowed "
                           f"asymmetry explains it")
    for a in ACCEPTED_BY_US_ONLY:
        if a.refusal in str(theirs) and a.evidence(ours):
            return a.code
    raise Disagreement(f"our reader accepts the image but gguf-py refuses it: {type(theirs).__name__}: {theirs}")


def _compare(ours: Readout, theirs: Readout) -> str:
    code = "both-accept"
    if ours.keys != theirs.keys:
        raise Disagreement(f"metadata keys differ: ours {ours.keys} vs gguf-py {theirs.keys}")
    for k in ours.keys:
        a, b = ours.types[k], theirs.types[k]
        empty_array = a[:1] == b == (ValueType.ARRAY,) and ours.values[k] == []
        if a != b and not empty_array:
            raise Disagreement(f"metadata {k!r}: value type {a} vs gguf-py {b}")
        if ours.values[k] != theirs.values[k]:
            raise Disagreement(f"metadata {k!r}: value {ours.values[k]!r:.200} vs gguf-py {theirs.values[k]!r:.200}")
    if ours.alignment != theirs.alignment:
        raise Disagreement(f"alignment {ours.alignment} vs gguf-py {theirs.alignment}")
    if [t["name"] for t in ours.tensors] != [t["name"] for t in theirs.tensors]:
        raise Disagreement(f"tensor names differ: ours {_names(ours)} vs gguf-py {_names(theirs)}")
    for a, b in zip(ours.tensors, theirs.tensors, strict=True):
        skip: set[str] = set()
        if a["n_bytes"] is None and a["type"] in _GGUF_PY_TYPES:  # see ACCEPTED_BY_US_ONLY[1]
            skip = {"n_bytes", "data"}
            code = "type-newer-than-kernelmap"
        for key in ("type", "shape", "n_elements", "n_bytes", "offset", "data"):
            if key not in skip and a[key] != b[key]:
                shown = (len(a[key]), len(b[key])) if key == "data" and a[key] is not None else (a[key], b[key])
                raise Disagreement(f"tensor {a['name']!r}: {key} {shown[0]!r} vs gguf-py {shown[1]!r}")
    return code
