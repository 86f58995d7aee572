"""GGML type table vs gguf-py's, and the cached whole-file sha256 (hit on same identity, miss on change)."""

from __future__ import annotations

import hashlib
import os

import pytest
from gguf_fixtures import write_with_gguf_py

import gguf
from kernelmap.errors import GGUFError
from kernelmap.gguf import GGML_TYPES, ggml_type, open_gguf, type_name

# gguf-py's table still gives Q8_1 the 40-byte block of an old layout (f32 d and s); ggml's block_q8_1 in the llama.cpp
# the contracts follow (0.3.36) is f16 d, f16 s and 32 quants: 36 bytes, what its CPU quantizer writes and ours too.
GGML_NOT_GGUF_PY = {9: (32, 36)}


def test_types_table_matches_gguf_py_block_geometry():
    ref = {int(t): size for t, size in gguf.GGML_QUANT_SIZES.items()}
    assert {t: ref[t] for t in GGML_NOT_GGUF_PY} == {9: (32, 40)}  # gguf-py still says 40: keep the exception honest
    ref.update(GGML_NOT_GGUF_PY)
    for type_id, entry in GGML_TYPES.items():
        assert ref[type_id] == (entry.block_size, entry.type_size), entry.name
        assert gguf.GGMLQuantizationType(type_id).name.lower() == entry.name


def test_types_unknown_id_is_named_and_raises_on_geometry():
    assert type_name(4) == "unknown:4"
    with pytest.raises(GGUFError, match="'w' has unsupported ggml type id 4"):
        ggml_type(4, tensor="w")


def test_sha256_is_whole_file_hash_and_cached_by_identity(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELMAP_CACHE", str(tmp_path / "cache"))
    path = write_with_gguf_py(tmp_path / "a.gguf")
    expected = hashlib.sha256(path.read_bytes()).hexdigest()
    with open_gguf(path) as f:
        assert f.sha256() == expected
    entries = list((tmp_path / "cache" / "gguf_sha256").iterdir())
    assert len(entries) == 1
    with open_gguf(path) as f:
        assert f.sha256() == expected
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    with open_gguf(path) as f:
        assert f.sha256() == hashlib.sha256(bytes(data)).hexdigest()


def test_sha256_ignores_a_corrupt_cache_entry(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELMAP_CACHE", str(tmp_path / "cache"))
    path = write_with_gguf_py(tmp_path / "a.gguf")
    with open_gguf(path) as f:
        f.sha256()
    for entry in (tmp_path / "cache" / "gguf_sha256").iterdir():
        entry.write_text("{not json")
    with open_gguf(path) as f:
        assert f.sha256() == hashlib.sha256(path.read_bytes()).hexdigest()
