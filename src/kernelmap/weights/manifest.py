"""Weights manifest (schema "kernelmap.weights_manifest/2"): weights.json <-> `Manifest`, and checks.

Each entry says where one tensor's bytes are: `file` "gguf" (the model file's own bytes, at their
absolute offset: the selected layout is the GGUF layout, so the program maps the GGUF) or
"weights.bin" (bytes the packer wrote, 64-byte aligned). `load_manifest` validates the sidecar
(schema, names, alignment, extents per file, sizes vs dtype and shape, the data file's size);
`check_manifest` refuses a manifest whose entries disagree with what the selected providers need.
It reads and checks; writing is `pack.py`'s job, and the repacked layouts are `repack.py`'s.
"""

from __future__ import annotations

import json
import mmap
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from kernelmap.errors import ModelError
from kernelmap.gguf.types import by_name, tensor_nbytes
from kernelmap.weights.repack import REPACKED, layout_nbytes, shape_error

__all__ = ["SCHEMA", "ALIGNMENT", "FILES", "GGUF_ALIGNMENT", "LAYOUTS", "WeightNeed", "ManifestEntry", "Manifest",
           "load_manifest", "check_manifest", "map_weights", "layout_error", "native_layout", "weight_name"]

SCHEMA = "kernelmap.weights_manifest/2"
ALIGNMENT = 64
GGUF_ALIGNMENT = 4  # kernels rely on no more than 4-byte alignment of weight rows (KERNEL_ABI.md)
FILES = ("weights.bin", "gguf")
DATA_FILE = "weights.bin"
MANIFEST_FILE = "weights.json"
# layout -> dtypes it may hold: the native GGUF layouts, then the repacked ones (repack.py)
LAYOUTS: dict[str, frozenset[str] | None] = {"ggml_blocks": None, "row_major": frozenset({"f32", "f16", "bf16"}),
                                             **{name: dtypes for name, (_src, dtypes) in REPACKED.items()}}
NATIVE_LAYOUTS = frozenset({"ggml_blocks", "row_major"})  # layouts whose bytes are the GGUF tensor's own
C_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")


@dataclass(frozen=True)
class WeightNeed:
    """One weight a selected provider needs: C-safe `name`, GGUF `tensor`, its dtype, the port's layout.

    `shape` (GGUF order, ne0 first) is optional; when given, pack and check compare it too (with `rows`,
    the slice's shape). `rows` = (a, b) packs only rows [a, b) of the tensor's outermost axis (a fused
    tensor read in parts); each row is whole blocks, so the slice's bytes are one contiguous range.
    """

    name: str
    tensor: str
    dtype: str
    layout: str
    shape: tuple[int, ...] | None = None
    rows: tuple[int, int] | None = None


def native_layout(layout: str) -> bool:
    """True when a layout's bytes are the GGUF tensor's own (no repacking), so they can be mapped."""
    return layout in NATIVE_LAYOUTS


def weight_name(cname: str, port_layout: str) -> str:
    """The manifest name of weight `cname` as a port in `port_layout` reads it: `cname` for the GGUF's own
    bytes, `cname__<layout>` for a repacked copy (one tensor may be read both ways by different ops)."""
    return f"{cname}__{port_layout}" if port_layout in REPACKED else cname


@dataclass(frozen=True)
class ManifestEntry:
    """One tensor (or row slice of one, `rows`): in which file (`gguf` or `weights.bin`) and where its
    bytes are, and what it is (shape in GGUF order). `sha256` is of the bytes; None for a GGUF entry
    (the file's hash covers it)."""

    name: str
    tensor: str
    dtype: str
    shape: tuple[int, ...]
    layout: str
    offset: int
    size: int
    sha256: str | None
    file: str = DATA_FILE
    rows: tuple[int, int] | None = None

    def as_dict(self) -> dict[str, Any]:
        doc = {"name": self.name, "tensor": self.tensor, "dtype": self.dtype, "shape": list(self.shape),
               "layout": self.layout, "file": self.file, "offset": self.offset, "size": self.size}
        if self.sha256 is not None:
            doc["sha256"] = self.sha256
        if self.rows is not None:
            doc["rows"] = list(self.rows)
        return doc


@dataclass(frozen=True)
class Manifest:
    """A packed-weights manifest; `path` is the weights.json it was loaded from or written to."""

    key: str
    source: dict[str, Any]
    total_size: int
    entries: tuple[ManifestEntry, ...]
    path: Path | None = None

    @property
    def data_path(self) -> Path:
        """The weights.bin beside the manifest."""
        if self.path is None:
            raise ModelError("manifest has no location", pointer="/data_file")
        return self.path.parent / DATA_FILE

    def entry(self, name: str) -> ManifestEntry:
        """The entry called `name` (ModelError naming it if absent)."""
        for e in self.entries:
            if e.name == name:
                return e
        raise ModelError(f"no entry {name!r}", path=self.path, pointer="/entries", value=name)

    def as_dict(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "key": self.key, "source": dict(self.source), "alignment": ALIGNMENT,
                "shape_order": "ne0_first", "data_file": DATA_FILE, "total_size": self.total_size,
                "entries": [e.as_dict() for e in self.entries]}


@lru_cache(maxsize=1)
def _validator() -> Any:
    import jsonschema

    schema = json.loads((Path(__file__).with_name("weights_manifest.schema.json")).read_text())
    return jsonschema.Draft202012Validator(schema)


def layout_error(layout: str, dtype: str, *, path: Any, pointer: str) -> ModelError | None:
    """The error for a layout that is unknown or cannot hold `dtype`, else None."""
    if layout not in LAYOUTS:
        return ModelError("unknown weight layout", path=path, pointer=pointer, value=layout,
                          expected=sorted(LAYOUTS))
    allowed = LAYOUTS[layout]
    if allowed is not None and dtype not in allowed:
        return ModelError(f"layout {layout} cannot hold {dtype} data", path=path, pointer=pointer,
                          value=dtype, expected=sorted(allowed))
    return None


def _manifest_from_doc(doc: Any, path: Path) -> Manifest:
    errors = sorted(_validator().iter_errors(doc), key=lambda e: list(e.absolute_path))
    if errors:
        err = errors[0]
        pointer = "/" + "/".join(str(p) for p in err.absolute_path)
        raise ModelError(f"manifest does not match {SCHEMA}: {err.message}", path=path, pointer=pointer)
    entries = []
    names: set[str] = set()
    extents: dict[str, list[tuple[int, int, int]]] = {f: [] for f in FILES}
    for i, raw in enumerate(doc["entries"]):
        rows = tuple(raw["rows"]) if "rows" in raw else None
        e = ManifestEntry(raw["name"], raw["tensor"], raw["dtype"], tuple(raw["shape"]), raw["layout"],
                          raw["offset"], raw["size"], raw.get("sha256"), raw["file"], rows)
        base = f"/entries/{i}"
        if e.name in names:
            raise ModelError("duplicate entry name", path=path, pointer=base + "/name", value=e.name)
        names.add(e.name)
        ggml = by_name(e.dtype)
        if ggml is None:
            raise ModelError("unknown dtype", path=path, pointer=base + "/dtype", value=e.dtype)
        bad = layout_error(e.layout, e.dtype, path=path, pointer=base + "/layout")
        if bad is not None:
            raise bad
        why = shape_error(e.layout, e.dtype, e.shape)
        if why is not None:
            raise ModelError(f"entry {e.name!r}: {why}", path=path, pointer=base + "/shape", value=list(e.shape))
        want = layout_nbytes(e.layout, e.dtype, e.shape, tensor_nbytes(ggml, e.shape))
        if e.shape[0] % ggml.block_size or want != e.size:
            raise ModelError(f"entry {e.name!r} size does not match its dtype, shape and layout", path=path,
                             pointer=base + "/size", value=e.size, expected=want)
        in_gguf = e.file == "gguf"
        if in_gguf and not native_layout(e.layout):
            raise ModelError(f"entry {e.name!r} is mapped from the GGUF but its layout is repacked", path=path,
                             pointer=base + "/file", value=e.layout, expected=sorted(NATIVE_LAYOUTS))
        align = GGUF_ALIGNMENT if in_gguf else ALIGNMENT
        if e.offset % align:
            raise ModelError(f"entry {e.name!r} offset is not {align}-byte aligned", path=path,
                             pointer=base + "/offset", value=e.offset)
        end, end_name = (doc["source"]["size"], "the source size") if in_gguf else (doc["total_size"], "total_size")
        if e.offset + e.size > end:
            raise ModelError(f"entry {e.name!r} runs past {end_name}", path=path, pointer=base + "/offset",
                             value=e.offset + e.size, expected=f"<= {end}")
        extents[e.file].append((e.offset, e.offset + e.size, i))
        entries.append(e)
    for spans in extents.values():
        spans.sort()
        for (_, end0, _), (start1, _, i1) in zip(spans, spans[1:], strict=False):
            if start1 < end0:
                raise ModelError("entry overlaps another entry", path=path, pointer=f"/entries/{i1}/offset",
                                 value=start1, expected=f">= {end0}")
    return Manifest(doc["key"], dict(doc["source"]), doc["total_size"], tuple(entries), path)


def load_manifest(path: str | os.PathLike[str]) -> Manifest:
    """Read and validate a weights.json; its weights.bin must exist with exactly `total_size` bytes."""
    path = Path(path)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ModelError(f"cannot read manifest: {exc.strerror}", path=path, pointer="") from None
    except ValueError as exc:
        raise ModelError(f"manifest is not valid JSON: {exc}", path=path, pointer="") from None
    except RecursionError:
        raise ModelError("manifest is not valid JSON: nested too deeply", path=path, pointer="") from None
    manifest = _manifest_from_doc(doc, path)
    data = manifest.data_path
    try:
        size = data.stat().st_size
    except OSError:
        raise ModelError("the manifest's data file is missing", path=data, pointer="",
                         hint="pack the weights again") from None
    if size != manifest.total_size:
        raise ModelError("data file size does not match the manifest", path=data, pointer="",
                         value=size, expected=manifest.total_size, hint="pack the weights again")
    return manifest


def check_manifest(manifest: Manifest, expected: Sequence[WeightNeed]) -> None:
    """Refuse a manifest that lacks a needed entry or disagrees on tensor, dtype, layout or shape."""
    index = {e.name: i for i, e in enumerate(manifest.entries)}
    for need in expected:
        i = index.get(need.name)
        if i is None:
            raise ModelError(f"entry {need.name!r} is missing", path=manifest.path, pointer="/entries",
                             value=need.name, hint="pack the weights again for this plan")
        e = manifest.entries[i]
        checks = [("tensor", e.tensor, need.tensor), ("dtype", e.dtype, need.dtype),
                  ("layout", e.layout, need.layout), ("rows", e.rows, need.rows)]
        if need.shape is not None:
            checks.append(("shape", list(e.shape), list(need.shape)))
        for field, found, wanted in checks:
            if found != wanted:
                raise ModelError(f"entry {need.name!r} {field} disagrees with the selected provider",
                                 path=manifest.path, pointer=f"/entries/{i}/{field}", value=found,
                                 expected=wanted if not isinstance(wanted, list) else str(wanted),
                                 hint="pack the weights again for this plan")


def _map_file(path: Path, size: int, what: str) -> Any:
    try:
        fh = open(path, "rb")
    except OSError as exc:
        raise ModelError(f"cannot open the {what}: {exc.strerror}", path=path, pointer="") from None
    with fh:
        found = os.fstat(fh.fileno()).st_size
        if found != size:
            raise ModelError(f"{what} size does not match the manifest", path=path, pointer="",
                             value=found, expected=size)
        return mmap.mmap(fh.fileno(), size, access=mmap.ACCESS_READ) if size else b""


def map_weights(manifest: Manifest, gguf_path: str | os.PathLike[str] | None = None) -> dict[str, np.ndarray]:
    """Memory-map weights.bin (and the GGUF, at `gguf_path` or the manifest's source path) read-only;
    return each entry's bytes as a zero-copy uint8 view."""
    maps: dict[str, Any] = {}
    if any(e.file == DATA_FILE for e in manifest.entries) or manifest.total_size:
        maps[DATA_FILE] = _map_file(manifest.data_path, manifest.total_size, "data file")
    if any(e.file == "gguf" for e in manifest.entries):
        source = Path(gguf_path) if gguf_path is not None else Path(manifest.source["path"])
        maps["gguf"] = _map_file(source, int(manifest.source["size"]), "model file")
    return {e.name: np.frombuffer(maps[e.file], dtype=np.uint8, count=e.size, offset=e.offset)
            for e in manifest.entries}
