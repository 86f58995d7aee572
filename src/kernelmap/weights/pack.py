"""Weight packing (after resolution): GGUF tensors the selected providers need -> weights.bin + weights.json.

Both layouts that exist today ("ggml_blocks", and "row_major" for f32/f16) are the tensor's native
GGUF bytes, copied as is, each at a 64-byte aligned offset; repacked layouts are not implemented
and an unknown layout is an error. Output is cached by a content key (source hash + needs) and
published atomically: temp files, fsync, rename the data file, then the manifest last.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import secrets
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, BinaryIO

from kernelmap.errors import ModelError
from kernelmap.gguf.reader import GGUFFile
from kernelmap.weights.manifest import (
    ALIGNMENT,
    C_NAME,
    DATA_FILE,
    MANIFEST_FILE,
    SCHEMA,
    Manifest,
    ManifestEntry,
    WeightNeed,
    layout_error,
    load_manifest,
)

__all__ = ["pack_weights", "pack_key"]

_PACK_FORMAT = 1  # bump when the bytes written for the same needs change
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


def _slice_bytes(gguf: GGUFFile, need: WeightNeed) -> Any:
    """The bytes `need` packs: the whole tensor, or the contiguous byte range of its row slice."""
    data = gguf.tensor_data(need.tensor)
    if need.rows is None:
        return data
    info = gguf.tensors[need.tensor]
    row = info.n_bytes // info.shape[-1]  # one outermost row is whole blocks (the reader checked the shape)
    lo, hi = need.rows
    return memoryview(data)[lo * row:hi * row]


def pack_key(source_sha256: str, needs: Sequence[WeightNeed]) -> str:
    """The content key: same source bytes + same needs (in order) -> same key -> reuse."""
    doc = {"schema": SCHEMA, "format": _PACK_FORMAT, "alignment": ALIGNMENT, "source": source_sha256,
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


def pack_weights(gguf: GGUFFile, needs: Sequence[WeightNeed], out_dir: Path) -> Manifest:
    """Write out_dir/weights.bin and out_dir/weights.json for `needs`, or reuse them if the key matches."""
    _check_needs(gguf, needs)
    out_dir = Path(out_dir)
    source = {"path": str(gguf.path), "size": gguf.size, "sha256": gguf.sha256()}
    key = pack_key(source["sha256"], needs)
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
        return _write(gguf, needs, out_dir, key, source)


def _write(gguf: GGUFFile, needs: Sequence[WeightNeed], out_dir: Path, key: str,
           source: dict[str, Any]) -> Manifest:
    temps: list[Path] = []
    try:
        bin_tmp, fh = _temp(out_dir, DATA_FILE)
        temps.append(bin_tmp)
        entries = []
        with fh:
            pos = 0
            for need in needs:
                pad = (-pos) % ALIGNMENT
                fh.write(bytes(pad))
                pos += pad
                data = _slice_bytes(gguf, need)
                size = memoryview(data).nbytes
                digest = _write_entry(fh, data)
                entries.append(ManifestEntry(need.name, need.tensor, need.dtype, _slice_shape(gguf, need),
                                             need.layout, pos, size, digest, need.rows))
                pos += size
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
