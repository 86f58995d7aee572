"""The model build cache: keyed on every input, installed atomically, safe under concurrency and SIGKILL.

The end-to-end tests run the compiler in subprocesses (a copied package, a gated compiler wrapper)
on the tiny synthetic model at the scalar ISA, so each build takes seconds.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from synth_model import write_synth_model

import kernelmap
from kernelmap.build.driver import compiler_identity
from kernelmap.build.inputs import source_digest
from kernelmap.compiler import CompileOptions, compile_model, model_key
from kernelmap.errors import BuildError

PACKAGE = Path(kernelmap.__file__).resolve().parent

RUN = """
import json, sys
msgs = []
def say(msg):
    msgs.append(msg)
    print(msg, file=sys.stderr, flush=True)
import kernelmap
from kernelmap.compiler import CompileOptions, compile_model
from kernelmap.runtime.model import Model
compiled = compile_model(sys.argv[1], CompileOptions(max_rows=8, isa=frozenset()), progress=say)
m = Model(compiled, n_ctx=32, threads=1)
logits = m.logits([2, 270, 271, 272, 273])
m.close()
print(json.dumps({"package": kernelmap.__file__, "key": compiled.info["key"], "build_dir": str(compiled.build_dir),
                  "kernel_library": compiled.info["kernel_library"],
                  "library": str(compiled.library), "units": [u["source"] for u in compiled.info["units"]],
                  "messages": msgs, "logits": [float(x) for x in logits]}))
"""

# A compiler wrapper: on each compile (-c) whose arguments contain $KM_TEST_MATCH (default: any), it
# touches $KM_TEST_MARK and waits for $KM_TEST_GATE to exist, then runs gcc.
GATED_CC = """#!/bin/sh
case " $* " in *" -c "*)
  case "$*" in *"$KM_TEST_MATCH"*)
    if [ -n "$KM_TEST_MARK" ]; then touch "$KM_TEST_MARK"; fi
    if [ -n "$KM_TEST_GATE" ]; then while [ ! -e "$KM_TEST_GATE" ]; do sleep 0.05; done; fi;;
  esac;;
esac
exec gcc "$@"
"""


@pytest.fixture(scope="module")
def synth(tmp_path_factory) -> Path:
    return write_synth_model(tmp_path_factory.mktemp("cache_synth") / "synth.gguf")


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KM_TEST_")}
    env["KERNELMAP_CACHE"] = str(tmp_path / "cache")
    env.update(extra)
    return env


def _start(gguf: Path, env: dict[str, str], cwd: Path, **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", RUN, str(gguf)], env=env, cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kw)


def _finish(proc: subprocess.Popen, timeout: float = 600) -> dict:
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, err[-3000:]
    return json.loads(out.strip().splitlines()[-1])


def _run(gguf: Path, env: dict[str, str], cwd: Path) -> dict:
    return _finish(_start(gguf, env, cwd))


def _gated_cc(tmp_path: Path) -> Path:
    cc = tmp_path / "gatedcc"
    cc.write_text(GATED_CC)
    cc.chmod(0o755)
    return cc


def _wait_for(path: Path, proc: subprocess.Popen, what: str, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    assert path.exists(), f"{what} never happened (exit {proc.poll()})"


def _final_entries(models: Path) -> list[str]:
    """Names under the models dir that are builds (not hidden temp dirs or lock files)."""
    return sorted(p.name for p in models.iterdir() if not p.name.startswith("."))


def _temp_entries(models: Path) -> list[str]:
    return sorted(p.name for p in models.iterdir() if p.name.startswith(".") and not p.name.endswith(".lock"))


def test_model_cache_edited_kernel_source_in_copied_package_rebuilds_and_runs_the_new_code(tmp_path, synth):
    pkg = tmp_path / "pkg"
    shutil.copytree(PACKAGE, pkg / "kernelmap", ignore=shutil.ignore_patterns("__pycache__"))
    env = _env(tmp_path, PYTHONPATH=str(pkg))
    first = _run(synth, env, tmp_path)
    assert first["package"] == str(pkg / "kernelmap" / "__init__.py")
    assert F32_LINEAR in first["units"]
    assert "using cached build" not in first["messages"]
    again = _run(synth, env, tmp_path)
    assert "using cached build" in again["messages"]
    assert (again["key"], again["logits"]) == (first["key"], first["logits"])

    _edit_f32_linear(pkg)
    edited = _run(synth, env, tmp_path)
    assert "using cached build" not in edited["messages"], "the edited kernel source did not change the cache key"
    assert edited["key"] != first["key"] and edited["library"] != first["library"]
    assert Path(first["library"]).is_file()  # the old library stays for the old key
    assert all(math.isfinite(x) for x in edited["logits"])
    assert edited["logits"] != first["logits"], "the rebuilt model does not run the edited kernel"


def test_source_digest_changes_with_any_package_file_and_ignores_bytecode(tmp_path):
    root = tmp_path / "kernelmap"
    shutil.copytree(PACKAGE, root, ignore=shutil.ignore_patterns("__pycache__"))
    base = source_digest(root)
    assert source_digest(root) == base
    emit = root / "codegen" / "emit.py"
    text = emit.read_text()
    emit.write_text(text + "# a comment changes the bytes\n")
    assert source_digest(root) != base
    emit.write_text(text)
    assert source_digest(root) == base
    header = root / "kernels" / "common" / "km_common.h"
    header.write_text(header.read_text() + "\n")
    changed_header = source_digest(root)
    assert changed_header != base
    (root / "kernels" / "linear" / "new_kernel.c").write_text("/* new */\n")
    assert source_digest(root) != changed_header
    (root / "codegen" / "__pycache__").mkdir()
    (root / "codegen" / "__pycache__" / "emit.cpython-311.pyc").write_bytes(b"\0")
    (root / "kernels" / "linear" / "new_kernel.c").unlink()
    assert source_digest(root) == changed_header


def test_compiler_identity_changes_with_the_compiler_file_and_its_environment(tmp_path, monkeypatch):
    a = tmp_path / "cc_a"
    b = tmp_path / "cc_b"
    a.write_text('#!/bin/sh\nexec gcc "$@"\n')
    b.write_text('#!/bin/sh\n# another build of the same compiler\nexec gcc "$@"\n')
    for cc in (a, b):
        cc.chmod(0o755)
    monkeypatch.delenv("CPATH", raising=False)
    ident_a = compiler_identity(str(a))
    assert "gcc version" in ident_a or "clang version" in ident_a
    assert compiler_identity(str(a)) == ident_a
    assert compiler_identity(str(b)) != ident_a
    monkeypatch.setenv("CPATH", str(tmp_path))
    assert compiler_identity(str(a)) != ident_a


def test_model_key_covers_compiler_sanitizer_and_options(tmp_path, synth, monkeypatch):
    monkeypatch.delenv("KERNELMAP_SANITIZE", raising=False)
    opts = CompileOptions(max_rows=8, isa=frozenset())
    base = model_key(synth, opts)
    assert model_key(synth, opts) == base
    assert model_key(synth, CompileOptions(max_rows=4, isa=frozenset())) != base
    monkeypatch.setenv("CC", str(_gated_cc(tmp_path)))
    assert model_key(synth, opts) != base
    monkeypatch.delenv("CC")
    monkeypatch.setenv("KERNELMAP_SANITIZE", "1")
    assert model_key(synth, opts) != base


def test_compile_model_refuses_to_replace_an_out_dir_that_is_not_a_build(tmp_path, synth):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    with pytest.raises(BuildError, match="not a kernelmap build"):
        compile_model(synth, CompileOptions(max_rows=8, isa=frozenset()), out_dir=out)
    assert (out / "notes.txt").read_text() == "keep me"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".mine.") and not p.name.endswith(".lock")] == []


def test_compile_model_replaces_a_previous_build_only_when_it_holds_nothing_else(tmp_path, synth):
    """A previous build is recompiled in place (changed options: a new build replaces it); the same build with a
    user's file added, at the top or in gen/, is refused and keeps the file (a build.json alone is not enough:
    a bundle has one too)."""
    out = tmp_path / "build"
    compile_model(synth, CompileOptions(max_rows=8, isa=frozenset()), out_dir=out)
    compile_model(synth, CompileOptions(max_rows=4, isa=frozenset()), out_dir=out)  # replaced
    assert json.loads((out / "build.json").read_text())["max_rows"] == 4
    for extra in ("notes.txt", "gen/edited.c"):
        (out / extra).write_text("keep me")
        with pytest.raises(BuildError, match="files a build does not write") as info:
            compile_model(synth, CompileOptions(max_rows=2, isa=frozenset()), out_dir=out)
        assert info.value.value == extra and (out / extra).read_text() == "keep me"
        (out / extra).unlink()


def test_model_cache_two_processes_compiling_one_model_at_once_both_succeed_and_leave_a_used_cache(tmp_path, synth):
    cc = _gated_cc(tmp_path)
    mark, gate = tmp_path / "a_compiling", tmp_path / "gate"
    env = _env(tmp_path, CC=str(cc))
    a = _start(synth, {**env, "KM_TEST_MARK": str(mark), "KM_TEST_GATE": str(gate)}, tmp_path)
    b = None
    try:
        _wait_for(mark, a, "process A reaching the compiler")
        b = _start(synth, env, tmp_path)
        # B reports that it waits for A's build (its progress goes to stderr line by line).
        for line in b.stderr:
            if "waiting for another process building this model" in line:
                break
        else:
            pytest.fail(f"process B never waited for A (exit {b.wait()})")
        gate.touch()
        ra = _finish(a)
        rb = _finish(b)
    finally:
        gate.touch()
        for p in (a, b):
            if p is not None and p.poll() is None:
                p.kill()
    assert "using cached build" not in ra["messages"]
    assert "using cached build" in rb["messages"]
    assert (rb["build_dir"], rb["library"], rb["logits"]) == (ra["build_dir"], ra["library"], ra["logits"])
    models = Path(ra["build_dir"]).parent
    assert _final_entries(models) == [ra["key"]] and _temp_entries(models) == []
    third = _run(synth, env, tmp_path)
    assert "using cached build" in third["messages"]
    assert (third["build_dir"], third["logits"]) == (ra["build_dir"], ra["logits"])


@pytest.mark.parametrize("stage,match", [("first compile (fusion's kernel library)", ""),
                                          ("model library, compiling model.c", "/gen/model.c")])
def test_model_cache_build_killed_in_gcc_leaves_nothing_under_the_final_name_and_next_run_is_correct(
        tmp_path, synth, stage, match):
    cc = _gated_cc(tmp_path)
    mark = tmp_path / "compiling"
    env = _env(tmp_path, CC=str(cc))
    killed = _start(synth, {**env, "KM_TEST_MARK": str(mark), "KM_TEST_GATE": str(tmp_path / "never"),
                            "KM_TEST_MATCH": match}, tmp_path, start_new_session=True)
    try:
        _wait_for(mark, killed, f"the build reaching the compiler ({stage})")
    finally:
        os.killpg(killed.pid, signal.SIGKILL)
        killed.communicate(timeout=60)
    assert killed.returncode == -signal.SIGKILL
    models = tmp_path / "cache" / "models"
    # Whatever was written went into the temp dir only: no build under a final name.
    assert _final_entries(models) == []
    temps = _temp_entries(models)
    assert len(temps) == 1
    if match:  # killed late: weights and generated C exist, in the temp dir
        assert (models / temps[0] / "weights.bin").is_file() and (models / temps[0] / "gen" / "model.c").is_file()
    # (finished libraries such as fusion's kernel library may be installed; the model's is not)
    assert [p for p in (tmp_path / "cache" / "lib").rglob("libkmmodel.so")
            if not any(q.startswith("km-build-") for q in p.parts)] == []

    second = _run(synth, env, tmp_path)
    assert "using cached build" not in second["messages"]
    assert _final_entries(models) == [second["key"]]
    assert _temp_entries(models) == []  # the dead build's temp dir was swept
    third = _run(synth, env, tmp_path)
    assert "using cached build" in third["messages"]
    assert (third["key"], third["library"], third["logits"]) == (second["key"], second["library"], second["logits"])
    if match:  # the same build with the plain compiler (another key) computes the same logits
        plain = _run(synth, _env(tmp_path), tmp_path)
        assert plain["key"] != second["key"] and plain["logits"] == second["logits"]


# A compiler wrapper that appends the source of each compile (-c: the last argument) to $KM_TEST_LOG.
LOGGING_CC = """#!/bin/sh
case " $* " in *" -c "*)
  for last in "$@"; do :; done
  echo "$last" >> "$KM_TEST_LOG";;
esac
exec gcc "$@"
"""


F32_LINEAR = "linear/f32_f32_ggml_ref.c"  # the linear of the synth model's f32 weights at the scalar ISA


def _edit_f32_linear(pkg: Path) -> None:
    """Double the f32 linear's output in the copied package (so a rebuilt model gives other logits)."""
    src = pkg / "kernelmap" / "kernels" / F32_LINEAR
    anchor = "y[m * N + n] = s;"
    text = src.read_text()
    assert text.count(anchor) == 1, f"edit anchor {anchor!r} not found in {src}: update this test"
    src.write_text(text.replace(anchor, "y[m * N + n] = 2.0f * s;"))


def _compiled(log: Path) -> list[str]:
    """Sources compiled since the log was last cleared (as paths relative to the package or gen dir)."""
    if not log.exists():
        return []
    lines = [line.strip() for line in log.read_text().splitlines() if line.strip()]
    log.unlink()
    return sorted(line.split("/kernelmap/kernels/")[-1] if "/kernelmap/kernels/" in line
                  else "gen/" + Path(line).name for line in lines)


def test_kernel_library_holds_the_selection_a_new_model_compiles_only_the_objects_it_lacks(tmp_path, synth):
    """Issue 16 item 4: a first run compiles the kernel units its plan selected (and the runtime), not every
    kernel the policy could select; a second model that needs a provider the first lacked compiles that
    provider's unit and its model.c only (every shared object is reused, a new library is linked); a model
    whose kernels are all cached compiles model.c alone; an edited kernel source recompiles that one unit."""
    pkg = tmp_path / "pkg"
    shutil.copytree(PACKAGE, pkg / "kernelmap", ignore=shutil.ignore_patterns("__pycache__"))
    cc = tmp_path / "logcc"
    cc.write_text(LOGGING_CC)
    cc.chmod(0o755)
    log = tmp_path / "compiles.log"
    env = _env(tmp_path, PYTHONPATH=str(pkg), CC=str(cc), KM_TEST_LOG=str(log))
    other = write_synth_model(tmp_path / "other.gguf", weight_type="q5_0", seed=7)
    third = write_synth_model(tmp_path / "third.gguf", weight_type="q5_0", seed=11, n_layers=3)

    first = _run(synth, env, tmp_path)
    built = _compiled(log)
    # the fuser's probe library may add the fused kernels its rules name (shared objects, same keys)
    probe = {"fused/qk_norm_rope_neox_f32_ref.c", "fused/residual_add_rmsnorm_f32_ref.c",
             "fused/residual_add_rmsnorm_quantize_q8_0_rne_ref.c", "fused/residual_add_rmsnorm_quantize_q8_k_ref.c",
             "fused/geglu_quantize_ref.c"}
    needed = {"gen/model.c", "runtime/km_runtime.c", *first["units"]}
    assert needed <= set(built) <= needed | probe, built
    assert len(built) == len(set(built)), f"an object was compiled twice: {built}"
    # the q5_0 providers (GGUF layout or q32_r8, whichever the resolver picks for the shapes) are the second model's
    assert not [u for u in built if u.startswith("linear/q5_0_")], "the library compiled a kernel the plan did not select"

    second = _run(other, env, tmp_path)
    assert second["key"] != first["key"] and "using cached build" not in second["messages"]
    missing = sorted(set(second["units"]) - set(built))  # its kernels no object of the first run covers
    assert [u for u in missing if u.startswith("linear/q5_0_q8_0_ggml")], missing
    assert _compiled(log) == sorted(["gen/model.c", *missing]), "a new model recompiled a cached kernel unit"
    assert second["kernel_library"] != first["kernel_library"] and Path(first["kernel_library"]).is_file()
    assert second["logits"] != first["logits"]

    again = _run(third, env, tmp_path)  # every kernel it selects is cached: model.c only, the library reused
    assert set(again["units"]) == set(second["units"])
    assert _compiled(log) == ["gen/model.c"] and again["kernel_library"] == second["kernel_library"]

    _edit_f32_linear(pkg)
    edited = _run(synth, env, tmp_path)
    # model.c is the same text (so its object is reused); only the edited kernel unit compiles again
    assert _compiled(log) == [F32_LINEAR]
    assert edited["kernel_library"] != first["kernel_library"] and Path(first["kernel_library"]).is_file()
    assert edited["logits"] != first["logits"], "the rebuilt library does not run the edited kernel"


def test_compiles_of_two_models_at_once_into_one_cache_share_objects_and_both_run(tmp_path, synth):
    """Two processes compiling different models into one empty cache at once: both succeed with the logits a
    lone build gives, and each kernel object is compiled by one of them only (the per-object lock)."""
    cc = tmp_path / "logcc"
    cc.write_text(LOGGING_CC)
    cc.chmod(0o755)
    log = tmp_path / "compiles.log"
    other = write_synth_model(tmp_path / "other.gguf", weight_type="q8_0", seed=7)
    env = _env(tmp_path, CC=str(cc), KM_TEST_LOG=str(log))
    procs = [_start(g, env, tmp_path) for g in (synth, other)]
    a, b = (_finish(p) for p in procs)
    built = _compiled(log)
    kernels = [u for u in built if not u.startswith("gen/")]
    assert len(kernels) == len(set(kernels)), f"a kernel object was compiled by both processes: {built}"
    assert set(a["units"]) <= set(kernels) and set(b["units"]) <= set(kernels)
    alone = _env(tmp_path / "alone")
    assert _run(synth, alone, tmp_path)["logits"] == a["logits"]
    assert _run(other, alone, tmp_path)["logits"] == b["logits"]


def _fake_build(models: Path, name: str, size: int, age: float) -> Path:
    d = models / name
    d.mkdir(parents=True)
    (d / "weights.bin").write_bytes(b"\0" * size)
    t = time.time() - age
    os.utime(d, (t, t))
    return d


def test_evict_models_removes_least_recently_used_builds_until_the_rest_fit(tmp_path):
    from kernelmap.build.driver import file_lock
    from kernelmap.compiler import evict_models

    models = tmp_path / "models"
    old, locked, mid, new = (_fake_build(models, n, 1000, age) for n, age in
                             (("old", 400), ("locked", 300), ("mid", 200), ("new", 100)))
    (models / ".x.tmp-1").mkdir()  # a build in progress is not counted nor touched
    with file_lock(models / ".locked.lock"):  # another process building or rebuilding it
        gone = evict_models(models, 2500, keep=new)
    assert [(d.name, size) for d, size in gone] == [("old", 1000), ("mid", 1000)]
    assert sorted(p.name for p in models.iterdir() if not p.name.endswith(".lock")) == [".x.tmp-1", "locked", "new"]
    # the kept build stays even when it alone exceeds the limit
    assert [d.name for d, _ in evict_models(models, 10, keep=new)] == ["locked"]
    assert _final_entries(models) == ["new"]


def test_model_cache_limit_from_the_environment(monkeypatch):
    from kernelmap.compiler import DEFAULT_MODEL_CACHE_GB, model_cache_limit

    monkeypatch.delenv("KERNELMAP_MODEL_CACHE_GB", raising=False)
    assert model_cache_limit() == DEFAULT_MODEL_CACHE_GB * 2**30
    monkeypatch.setenv("KERNELMAP_MODEL_CACHE_GB", "0.5")
    assert model_cache_limit() == 2**29
    monkeypatch.setenv("KERNELMAP_MODEL_CACHE_GB", "unlimited")
    assert model_cache_limit() is None
    for bad in ("0", "-1", "nan", "inf", "ten"):
        monkeypatch.setenv("KERNELMAP_MODEL_CACHE_GB", bad)
        with pytest.raises(BuildError) as info:
            model_cache_limit()
        assert info.value.line().startswith("KERNELMAP_MODEL_CACHE_GB: model cache limit out of range"), info.value.line()


def test_compile_model_evicts_the_least_recently_used_model_beyond_the_cache_limit(tmp_path, synth, monkeypatch):
    """Three option sets of one model, a limit of about two builds: a cache hit makes the first build the most
    recently used, so the third build evicts the second."""
    monkeypatch.setenv("KERNELMAP_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("KERNELMAP_MODEL_CACHE_GB", "unlimited")
    said: list[str] = []
    a = compile_model(synth, CompileOptions(max_rows=8, isa=frozenset()))
    b = compile_model(synth, CompileOptions(max_rows=4, isa=frozenset()))
    size = max(sum(f.stat().st_size for f in d.rglob("*") if f.is_file()) for d in (a.build_dir, b.build_dir))
    monkeypatch.setenv("KERNELMAP_MODEL_CACHE_GB", str(2.5 * size / 2**30))
    time.sleep(0.05)
    assert compile_model(synth, CompileOptions(max_rows=8, isa=frozenset()), progress=said.append).build_dir == \
        a.build_dir
    assert said[-1] == "using cached build"
    c = compile_model(synth, CompileOptions(max_rows=2, isa=frozenset()), progress=said.append)
    assert any(m.startswith("model cache: removed 1 least recently used build(s)") for m in said), said
    models = a.build_dir.parent
    assert _final_entries(models) == sorted([a.build_dir.name, c.build_dir.name])
    assert compile_model(synth, CompileOptions(max_rows=4, isa=frozenset())).build_dir == b.build_dir  # rebuilt


def test_cache_command_lists_prunes_and_clears_model_builds(tmp_path, monkeypatch, capsys):
    from kernelmap.build.driver import file_lock
    from kernelmap.cli import main

    monkeypatch.setenv("KERNELMAP_CACHE", str(tmp_path))
    models = tmp_path / "models"
    for name, age in (("aaa", 300), ("bbb", 200), ("ccc", 100)):
        _fake_build(models, name, 1 << 20, age)
    assert main(["cache", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [b["key"] for b in doc["builds"]] == ["aaa", "bbb", "ccc"] and doc["parts"]["models"] == 3 << 20
    monkeypatch.setenv("KERNELMAP_MODEL_CACHE_GB", str(2.5 / 1024))  # 2.5 MiB: the oldest goes
    assert main(["cache", "--prune", "--json"]) == 0
    assert [r["key"] for r in json.loads(capsys.readouterr().out)["removed"]] == ["aaa"]
    with file_lock(models / ".ccc.lock"):  # being rebuilt by another process: stays
        assert main(["cache", "--clear"]) == 0
    out = capsys.readouterr()
    assert "removed bbb (1.0 MiB)" in out.err and "ccc" not in out.err
    assert _final_entries(models) == ["ccc"] and "model builds: 1," in out.out
    assert main(["cache", "--prune", "--clear"]) == 2  # exclusive
    assert "--prune and --clear are exclusive" in capsys.readouterr().err
    monkeypatch.setenv("KERNELMAP_MODEL_CACHE_GB", "-3")
    assert main(["cache"]) == 1
    assert capsys.readouterr().err.strip().startswith("error: KERNELMAP_MODEL_CACHE_GB: model cache limit out of range")
