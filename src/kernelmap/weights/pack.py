"""Weight packing (after resolution): GGUF tensors the selected providers need -> weights.json (+ weights.bin).

A tensor whose selected layout is the GGUF layout ("ggml_blocks", and "row_major" for f32/f16) is not
copied: its manifest entry points at its bytes in the GGUF file, which the generated program
memory-maps (a tensor at an offset the kernels cannot take is copied). Only tensors that need other
bytes go into weights.bin, each at a 64-byte aligned offset: those in a repacked layout (repack.py;
the same tensor may also be mapped in its GGUF layout for another op, under another name) and, with
`self_contained`, every tensor (as is). An unknown layout, or one that cannot hold the tensor's dtype
or shape, is an error before anything is written. Output is cached by a content key (source hash + needs + mode) and
published atomically: temp files, fsync, rename the data file, then the manifest last.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import secrets
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, BinaryIO

from kernelmap.errors import ModelError
from kernelmap.gguf.reader import GGUFFile
from kernelmap.weights.manifest import (
    ALIGNMENT,
    C_NAME,
    DATA_FILE,
    GGUF_ALIGNMENT,
    MANIFEST_FILE,
    SCHEMA,
    Manifest,
    ManifestEntry,
    WeightNeed,
    layout_error,
    load_manifest,
    native_layout,
)
from kernelmap.weights.repack import repack, shape_error

__all__ = ["pack_weights", "pack_key"]

_PACK_FORMAT = 2  # bump when the bytes written for the same needs change
_LOCK_FILE = ".weights.lock"


def _check_needs(gguf: GGUFFile, needs: Sequence[WeightNeed]) -> None:
    """Fail closed before writing anything: names, tensors, dtypes, layouts, shapes, known types."""
    seen: set[str] = set()
    for i, need in enumerate(needs):
        where = f"needs[{i}]"
        if not isinstance(need.name, str) or not C_NAME.fullmatch(need.name):
            raise ModelError("weight name is not a C identifier", path=gguf.path, pointer=where + "/name",
                             value=need.name, expected="[A-Za-z_][A-Za-z0-9_]*, at most 128 characters")
        if need.name in seen:
            raise ModelError("duplicate weight name", path=gguf.path, pointer=where + "/name", value=need.name)
        seen.add(need.name)
        info = gguf.tensors.get(need.tensor)
        if info is None:
            raise ModelError(f"weight {need.name!r} needs a tensor the file does not have", path=gguf.path,
                             pointer=f"tensors/{need.tensor}", value=need.tensor)
        if info.type_name != need.dtype:
            raise ModelError(f"weight {need.name!r}: tensor {need.tensor!r} has a different dtype",
                             path=gguf.path, pointer=f"tensors/{need.tensor}/type", value=info.type_name,
                             expected=need.dtype, hint="the selected provider was resolved for another dtype")
        bad = layout_error(need.layout, need.dtype, path=gguf.path, pointer=where + "/layout")
        if bad is not None:
            raise bad
        info.n_bytes  # noqa: B018 - raises GGUFError naming tensor and type id for an unknown type
        shape = _slice_shape(gguf, need)
        if need.shape is not None and tuple(need.shape) != shape:
            raise ModelError(f"weight {need.name!r}: tensor {need.tensor!r} has a different shape",
                             path=gguf.path, pointer=f"tensors/{need.tensor}/shape", value=list(shape),
                             expected=str(list(need.shape)))
        why = shape_error(need.layout, need.dtype, shape)
        if why is not None:
            raise ModelError(f"weight {need.name!r}: {why}", path=gguf.path, pointer=where + "/layout",
                             value=need.layout)


def _slice_shape(gguf: GGUFFile, need: WeightNeed) -> tuple[int, ...]:
    """The shape (GGUF order) of what `need` packs: the tensor, or rows [a, b) of its outermost axis."""
    info = gguf.tensors[need.tensor]
    if need.rows is None:
        return tuple(info.shape)
    lo, hi = need.rows
    outer = info.shape[-1]
    if len(info.shape) < 2 and info.n_bytes % outer:
        raise ModelError(f"weight {need.name!r}: a 1-D block-quantized tensor cannot be sliced", path=gguf.path,
                         pointer=f"tensors/{need.tensor}/type", value=need.dtype)
    if not (isinstance(lo, int) and isinstance(hi, int) and 0 <= lo < hi <= outer):
        raise ModelError(f"weight {need.name!r}: row slice outside tensor {need.tensor!r}", path=gguf.path,
                         pointer=f"tensors/{need.tensor}/shape", value=[lo, hi], expected=f"0 <= a < b <= {outer}")
    return (*info.shape[:-1], hi - lo)


def _slice_extent(gguf: GGUFFile, need: WeightNeed) -> tuple[int, int]:
    """(absolute offset in the GGUF file, size) of the bytes `need` packs: the tensor or its row slice."""
    info = gguf.tensors[need.tensor]
    if need.rows is None:
        return info.offset, info.n_bytes
    row = info.n_bytes // info.shape[-1]
    lo, hi = need.rows
    return info.offset + lo * row, (hi - lo) * row


def _slice_bytes(gguf: GGUFFile, need: WeightNeed) -> Any:
    """The bytes `need` packs: the whole tensor, or the contiguous byte range of its row slice."""
    data = gguf.tensor_data(need.tensor)
    if need.rows is None:
        return data
    info = gguf.tensors[need.tensor]
    row = info.n_bytes // info.shape[-1]  # one outermost row is whole blocks (the reader checked the shape)
    lo, hi = need.rows
    return memoryview(data)[lo * row:hi * row]


def pack_key(source_sha256: str, needs: Sequence[WeightNeed], self_contained: bool = False) -> str:
    """The content key: same source bytes + same needs (in order) + same mode -> same key -> reuse."""
    doc = {"schema": SCHEMA, "format": _PACK_FORMAT, "alignment": ALIGNMENT, "source": source_sha256,
           "self_contained": self_contained,
           "needs": [[n.name, n.tensor, n.dtype, n.layout, list(n.shape) if n.shape else None]
                     + ([list(n.rows)] if n.rows is not None else []) for n in needs]}
    return hashlib.sha256(json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _reusable(out_dir: Path, key: str) -> Manifest | None:
    path = out_dir / MANIFEST_FILE
    if not path.exists():
        return None
    try:
        manifest = load_manifest(path)
    except ModelError:
        return None
    return manifest if manifest.key == key else None


@contextlib.contextmanager
def _locked(out_dir: Path) -> Iterator[None]:
    """Serialise writers of one out_dir (correctness never depends on it: publication is by rename)."""
    try:
        fd = os.open(out_dir / _LOCK_FILE, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
    except OSError as exc:
        raise ModelError(f"cannot lock the weights directory: {exc.strerror}", path=out_dir,
                         pointer="") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _remove_stale_temps(out_dir: Path) -> None:
    """Delete temp files left by packers that died (their pid is part of the name)."""
    for tmp in out_dir.glob(".weights.*.tmp"):
        parts = tmp.name.split(".")
        try:
            pid = int(parts[-3])
        except (ValueError, IndexError):
            continue
        if pid == os.getpid():
            continue
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            with contextlib.suppress(OSError):
                tmp.unlink()
        except OSError:
            pass


def _temp(out_dir: Path, final: str) -> tuple[Path, BinaryIO]:
    path = out_dir / f".{final}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o644)
    return path, os.fdopen(fd, "wb")


def _write_entry(fh: BinaryIO, data: Any) -> str:
    """Append one tensor's bytes and return their sha256 (the caller has aligned the position)."""
    view = memoryview(data)
    fh.write(view)
    return hashlib.sha256(view).hexdigest()


def _replace(src: Path, dst: Path) -> None:
    os.replace(src, dst)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


Progress = Callable[[int, int], None]  # (tensors done, tensors in all)


def pack_weights(gguf: GGUFFile, needs: Sequence[WeightNeed], out_dir: Path, *, self_contained: bool = False,
                 progress: Progress | None = None) -> Manifest:
    """Write out_dir/weights.json (and weights.bin) for `needs`, or reuse them if the key matches.

    Tensors in the GGUF layout are mapped from the GGUF, unless `self_contained` asks for every byte
    in weights.bin. `progress(done, total)` counts tensors."""
    _check_needs(gguf, needs)
    out_dir = Path(out_dir)
    source = {"path": str(gguf.path), "size": gguf.size, "sha256": gguf.sha256()}
    key = pack_key(source["sha256"], needs, self_contained)
    found = _reusable(out_dir, key)
    if found is not None:
        return found
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ModelError(f"cannot create the weights directory: {exc.strerror}", path=out_dir, pointer="") from None
    with _locked(out_dir):
        found = _reusable(out_dir, key)
        if found is not None:
            return found
        _remove_stale_temps(out_dir)
        return _write(gguf, needs, out_dir, key, source, self_contained, progress or (lambda _d, _t: None))


def _write(gguf: GGUFFile, needs: Sequence[WeightNeed], out_dir: Path, key: str,
           source: dict[str, Any], self_contained: bool, progress: Progress) -> Manifest:
    temps: list[Path] = []
    try:
        bin_tmp, fh = _temp(out_dir, DATA_FILE)
        temps.append(bin_tmp)
        entries = []
        with fh:
            pos = 0
            progress(0, len(needs))
            for done, need in enumerate(needs, start=1):
                shape = _slice_shape(gguf, need)
                start, size = _slice_extent(gguf, need)
                if not self_contained and native_layout(need.layout) and start % GGUF_ALIGNMENT == 0:
                    entries.append(ManifestEntry(need.name, need.tensor, need.dtype, shape, need.layout,
                                                 start, size, None, "gguf", need.rows))
                    progress(done, len(needs))
                    continue
                pad = (-pos) % ALIGNMENT
                fh.write(bytes(pad))
                pos += pad
                data = _slice_bytes(gguf, need)
                if not native_layout(need.layout):
                    data = repack(need.layout, need.dtype, data, shape)
                    size = data.size
                digest = _write_entry(fh, data)
                entries.append(ManifestEntry(need.name, need.tensor, need.dtype, shape, need.layout, pos, size,
                                             digest, rows=need.rows))
                pos += size
                progress(done, len(needs))
            fh.flush()
            os.fsync(fh.fileno())
        manifest = Manifest(key, source, pos, tuple(entries), out_dir / MANIFEST_FILE)
        json_tmp, jh = _temp(out_dir, MANIFEST_FILE)
        temps.append(json_tmp)
        with jh:
            jh.write(json.dumps(manifest.as_dict(), indent=1).encode())
            jh.flush()
            os.fsync(jh.fileno())
        # A manifest never describes another data file: drop the old one first, publish it last.
        with contextlib.suppress(FileNotFoundError):
            os.unlink(out_dir / MANIFEST_FILE)
        _replace(bin_tmp, out_dir / DATA_FILE)
        _replace(json_tmp, out_dir / MANIFEST_FILE)
        _fsync_dir(out_dir)
        return manifest
    except OSError as exc:
        raise ModelError(f"cannot write packed weights: {exc.strerror}", path=out_dir, pointer="",
                         hint="check free disk space and permissions") from None
    finally:
        for tmp in temps:
            with contextlib.suppress(OSError):
                tmp.unlink()
