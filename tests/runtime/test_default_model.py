"""The default model's path (kernelmap.runtime.default_model_path): the package's assemble function runs under a
file lock, one process or thread at a time, and a checksum refusal of a file an interrupted assembly left behind
(FileExistsError) is rebuilt with overwrite=True instead of failing every later run; where the cache cannot hold
the lock file the call runs unlocked."""

from __future__ import annotations

import json
import sys
import threading
import time
import types

import pytest

from kernelmap.runtime import model as runtime_model


@pytest.fixture
def fake_package(tmp_path, monkeypatch):
    """A default_model.json naming a fake module whose assemble() records how many calls overlap."""
    state = {"active": 0, "most": 0, "calls": [], "stale": False}
    lock = threading.Lock()
    target = tmp_path / "model.gguf"

    def assemble(overwrite: bool = False):
        with lock:
            state["active"] += 1
            state["most"] = max(state["most"], state["active"])
            state["calls"].append(overwrite)
        try:
            if state["stale"] and not overwrite:
                raise FileExistsError(f"{target} already exists with an unexpected sha256")
            time.sleep(0.05)
            target.write_bytes(b"GGUF")
            state["stale"] = False
            return str(target)
        finally:
            with lock:
                state["active"] -= 1

    module = types.ModuleType("km_fake_model_pkg")
    module.assemble = assemble
    monkeypatch.setitem(sys.modules, "km_fake_model_pkg", module)
    spec = tmp_path / "default_model.json"
    spec.write_text(json.dumps({"package": "km-fake-model-pkg", "module": "km_fake_model_pkg", "function": "assemble"}))
    monkeypatch.setattr(runtime_model, "DEFAULT_MODEL_FILE", spec)
    monkeypatch.setenv("KERNELMAP_CACHE", str(tmp_path / "cache"))
    return state, target


def test_concurrent_callers_assemble_one_at_a_time(fake_package):
    state, target = fake_package
    got: list[str] = []
    threads = [threading.Thread(target=lambda: got.append(str(runtime_model.default_model_path()))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got == [str(target)] * 4
    assert len(state["calls"]) == 4 and state["most"] == 1


def test_a_stale_file_is_rebuilt(fake_package):
    state, target = fake_package
    state["stale"] = True
    assert runtime_model.default_model_path() == target
    assert state["calls"] == [False, True] and target.read_bytes() == b"GGUF"


def test_an_unusable_cache_still_gives_the_path(fake_package, tmp_path, monkeypatch):
    """A cache where no lock file can be made (here: a regular file in its place) does not stop tokenize or inspect
    from finding the model: the call runs unlocked."""
    state, target = fake_package
    blocker = tmp_path / "not_a_dir"
    blocker.write_text("")
    monkeypatch.setenv("KERNELMAP_CACHE", str(blocker / "cache"))
    assert runtime_model.default_model_path() == target
    assert state["calls"] == [False]


def test_a_file_hashed_before_to_the_expected_digest_skips_the_package(fake_package, tmp_path, monkeypatch):
    """With path_function and sha256_attribute in the spec, a file whose current identity kernelmap hashed to the
    package's expected digest is returned without calling the package (which hashes the whole file); a file never
    hashed, changed since, or hashed to another digest goes through the package."""
    import hashlib

    from kernelmap.gguf import reader

    state, target = fake_package
    module = sys.modules["km_fake_model_pkg"]
    module.default_output_path = lambda: target
    module.EXPECTED_SHA256 = hashlib.sha256(b"GGUF").hexdigest()
    spec = tmp_path / "default_model.json"
    spec.write_text(json.dumps({"package": "km-fake-model-pkg", "module": "km_fake_model_pkg", "function": "assemble",
                                "path_function": "default_output_path", "sha256_attribute": "EXPECTED_SHA256"}))

    def record(digest: str) -> None:  # what hashing the file (GGUFFile.sha256) leaves in the cache
        ident = reader._sha256_cache_key(str(target))
        reader._write_cache_entry(reader._sha256_entry(ident), {"identity": ident, "sha256": digest})

    assert runtime_model.default_model_path() == target and state["calls"] == [False]  # never hashed
    record(module.EXPECTED_SHA256)
    assert runtime_model.default_model_path() == target and state["calls"] == [False]  # the fast path
    time.sleep(0.01)
    target.write_bytes(b"GGUF!")  # changed since: its identity has no record
    assert runtime_model.default_model_path() == target and state["calls"] == [False, False]
    record(hashlib.sha256(b"other").hexdigest())  # a record of another digest
    assert runtime_model.default_model_path() == target and state["calls"] == [False, False, False]
