"""Packed-weights manifest (schema "kernelmap.weights_manifest/1"): weights.json <-> `Manifest`, and checks.

`load_manifest` validates the sidecar (schema, names, alignment, extents, sizes vs dtype and shape,
the data file's size); `check_manifest` refuses a manifest whose entries disagree with what the
selected providers need. It reads and checks; writing is `pack.py`'s job.
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

__all__ = ["SCHEMA", "ALIGNMENT", "LAYOUTS", "WeightNeed", "ManifestEntry", "Manifest", "load_manifest",
           "check_manifest", "map_weights", "layout_error"]

SCHEMA = "kernelmap.weights_manifest/1"
ALIGNMENT = 64
DATA_FILE = "weights.bin"
MANIFEST_FILE = "weights.json"
# layout -> dtypes it may hold; both are the native GGUF bytes (repacked layouts do not exist yet)
LAYOUTS: dict[str, frozenset[str] | None] = {"ggml_blocks": None, "row_major": frozenset({"f32", "f16", "bf16"})}
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


@dataclass(frozen=True)
class ManifestEntry:
    """One packed tensor (or row slice of one): where it lives in weights.bin and what it is (shape in GGUF order)."""

    name: str
    tensor: str
    dtype: str
    shape: tuple[int, ...]
    layout: str
    offset: int
    size: int
    sha256: str
    rows: tuple[int, int] | None = None

    def as_dict(self) -> dict[str, Any]:
        doc = {"name": self.name, "tensor": self.tensor, "dtype": self.dtype, "shape": list(self.shape),
               "layout": self.layout, "offset": self.offset, "size": self.size, "sha256": self.sha256}
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
                          expected=sorted(LAYOUTS), hint="repacked layouts are not implemented yet")
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
    extents = []
    for i, raw in enumerate(doc["entries"]):
        rows = tuple(raw["rows"]) if "rows" in raw else None
        e = ManifestEntry(raw["name"], raw["tensor"], raw["dtype"], tuple(raw["shape"]), raw["layout"],
                          raw["offset"], raw["size"], raw["sha256"], rows)
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
        if e.shape[0] % ggml.block_size or tensor_nbytes(ggml, e.shape) != e.size:
            raise ModelError(f"entry {e.name!r} size does not match its dtype and shape", path=path,
                             pointer=base + "/size", value=e.size, expected=tensor_nbytes(ggml, e.shape))
        if e.offset % ALIGNMENT:
            raise ModelError(f"entry {e.name!r} offset is not {ALIGNMENT}-byte aligned", path=path,
                             pointer=base + "/offset", value=e.offset)
        if e.offset + e.size > doc["total_size"]:
            raise ModelError(f"entry {e.name!r} runs past total_size", path=path, pointer=base + "/offset",
                             value=e.offset + e.size, expected=f"<= {doc['total_size']}")
        extents.append((e.offset, e.offset + e.size, i))
        entries.append(e)
    extents.sort()
    for (_, end0, _), (start1, _, i1) in zip(extents, extents[1:], strict=False):
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


def map_weights(manifest: Manifest) -> dict[str, np.ndarray]:
    """Memory-map weights.bin read-only; return each entry's bytes as a zero-copy uint8 view."""
    data = manifest.data_path
    with open(data, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        if size != manifest.total_size:
            raise ModelError("data file size does not match the manifest", path=data, pointer="",
                             value=size, expected=manifest.total_size)
        if size == 0:
            return {e.name: np.zeros(0, np.uint8) for e in manifest.entries}
        mm = mmap.mmap(fh.fileno(), size, access=mmap.ACCESS_READ)
    return {e.name: np.frombuffer(mm, dtype=np.uint8, count=e.size, offset=e.offset) for e in manifest.entries}
