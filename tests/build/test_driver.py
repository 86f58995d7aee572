"""Tests for kernelmap.build.driver: content-hash keys, atomic installs, failures, kills, concurrency, ASan."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from kernelmap.build import driver
from kernelmap.build.driver import CompileUnit, build_shared
from kernelmap.errors import BuildError

ADD_SRC = """#include <stdint.h>
void km_add_one__ref(float *y, int64_t n) { for (int64_t i = 0; i < n; i++) y[i] += 1.0f; }
"""

OOB_SRC = """#include <stdint.h>
/* Writes one element past the end: ASan must report it. */
void km_oob__ref(float *y, int64_t n) { for (int64_t i = 0; i <= n; i++) y[i] = 1.0f; }
"""


def _src(tmp_path: Path, text: str, name: str = "k.c") -> Path:
    path = tmp_path / "src" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _finals(root: Path) -> list[Path]:
    """Every library under a final cache name (temporary build dirs excluded)."""
    return [p for p in root.rglob("*.so") if not any(part.startswith("km-build-") for part in p.parts)]


def _fake_cc(tmp_path: Path, name: str, body: str) -> Path:
    path = tmp_path / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return path


def test_build_shared_tiny_kernel_loads_and_runs(tmp_path):
    lib_path = build_shared([CompileUnit(_src(tmp_path, ADD_SRC))], name="t", out_dir=tmp_path / "c")
    lib = ctypes.CDLL(str(lib_path))
    buf = (ctypes.c_float * 3)(1.0, 2.0, 3.0)
    lib.km_add_one__ref(buf, ctypes.c_int64(3))
    assert list(buf) == [2.0, 3.0, 4.0]


def test_build_shared_same_inputs_reuse_cached_file(tmp_path):
    unit = CompileUnit(_src(tmp_path, ADD_SRC))
    first = build_shared([unit], name="t", out_dir=tmp_path / "c")
    mtime = first.stat().st_mtime_ns
    second = build_shared([unit], name="t", out_dir=tmp_path / "c")
    assert first == second and second.stat().st_mtime_ns == mtime


def test_build_shared_source_change_changes_key(tmp_path):
    src = _src(tmp_path, ADD_SRC)
    a = build_shared([CompileUnit(src)], name="t", out_dir=tmp_path / "c")
    src.write_text(ADD_SRC + "\nint km_extra__ref(void) { return 1; }\n")
    b = build_shared([CompileUnit(src)], name="t", out_dir=tmp_path / "c")
    assert a.parent != b.parent and a.is_file() and b.is_file()


def test_build_shared_flag_change_changes_key(tmp_path):
    src = _src(tmp_path, ADD_SRC)
    a = build_shared([CompileUnit(src)], name="t", out_dir=tmp_path / "c")
    b = build_shared([CompileUnit(src, ("-mavx2",))], name="t", out_dir=tmp_path / "c")
    c = build_shared([CompileUnit(src)], name="t", out_dir=tmp_path / "c", extra_cflags=["-DKM_X=1"])
    assert len({a.parent, b.parent, c.parent}) == 3


def test_build_shared_header_change_changes_key(tmp_path):
    inc = tmp_path / "inc"
    inc.mkdir()
    (inc / "toy.h").write_text("#define TOY 1\n")
    src = _src(tmp_path, '#include "toy.h"\n' + ADD_SRC)
    a = build_shared([CompileUnit(src)], name="t", out_dir=tmp_path / "c", include_dirs=[inc])
    (inc / "toy.h").write_text("#define TOY 2\n")
    b = build_shared([CompileUnit(src)], name="t", out_dir=tmp_path / "c", include_dirs=[inc])
    assert a.parent != b.parent


def test_build_shared_compiler_change_changes_key(tmp_path, monkeypatch):
    src = _src(tmp_path, ADD_SRC)
    a = build_shared([CompileUnit(src)], name="t", out_dir=tmp_path / "c")
    other = _fake_cc(tmp_path, "othercc",
                     'if [ "$1" = "--version" ]; then echo "othercc 99.1"; exit 0; fi\nexec gcc "$@"\n')
    monkeypatch.setenv("CC", str(other))
    b = build_shared([CompileUnit(src)], name="t", out_dir=tmp_path / "c")
    assert a.parent != b.parent


def test_build_shared_compile_error_raises_with_compiler_message_and_installs_nothing(tmp_path):
    src = _src(tmp_path, "void km_bad__ref(void) { this is not C; }\n", "bad.c")
    with pytest.raises(BuildError) as err:
        build_shared([CompileUnit(src)], name="t", out_dir=tmp_path / "c")
    assert "compile failed" in str(err.value) and "error:" in str(err.value)
    assert err.value.path == str(src)
    assert _finals(tmp_path / "c") == []
    # Only the key's lock file stays (locks are never deleted, so no waiter can lock a stale inode).
    assert [p.suffix for p in (tmp_path / "c").iterdir()] == [driver.LOCK_SUFFIX]


def test_build_shared_missing_source_is_refused(tmp_path):
    with pytest.raises(BuildError) as err:
        build_shared([CompileUnit(tmp_path / "nope.c")], name="t", out_dir=tmp_path / "c")
    assert "source file not found" in str(err.value)


BUILD_SCRIPT = """
import sys
from pathlib import Path
from kernelmap.build.driver import CompileUnit, build_shared
print(build_shared([CompileUnit(Path(sys.argv[1]))], name="t", out_dir=Path(sys.argv[2])), flush=True)
"""


def test_build_shared_concurrent_processes_same_key_agree(tmp_path):
    src = _src(tmp_path, ADD_SRC)
    out = tmp_path / "c"
    procs = [subprocess.Popen([sys.executable, "-c", BUILD_SCRIPT, str(src), str(out)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(4)]
    results = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), [r[1] for r in results]
    paths = {r[0].strip() for r in results}
    assert len(paths) == 1
    assert len(_finals(out)) == 1
    lib = ctypes.CDLL(paths.pop())
    assert hasattr(lib, "km_add_one__ref")


PAIR_SCRIPT = """
import sys
from pathlib import Path
from kernelmap.build.driver import CompileUnit, build_shared
units = [CompileUnit(Path(a)) for a in sys.argv[2:]]
print(build_shared(units, name="t", out_dir=Path(sys.argv[1])), flush=True)
"""

# Logs each compiled source; a compile of $KM_TEST_MATCH touches $KM_TEST_MARK and waits for $KM_TEST_GATE.
GATED_LOGGING_CC = """case " $* " in *" -c "*)
  for last in "$@"; do :; done
  echo "$last" >> "$KM_TEST_LOG"
  case "$last" in *"$KM_TEST_MATCH")
    touch "$KM_TEST_MARK"; while [ ! -e "$KM_TEST_GATE" ]; do sleep 0.05; done;;
  esac;;
esac
exec gcc "$@"
"""


def _blocked_on(lock_dir: Path) -> bool:
    """True if some process waits for an flock on a `.*.lock` file in `lock_dir` (Linux /proc/locks)."""
    inodes = {str(p.stat().st_ino) for p in lock_dir.glob(".*.lock")} if lock_dir.is_dir() else set()
    for line in Path("/proc/locks").read_text().splitlines():
        fields = line.split()
        if "->" in fields and fields[-3].rpartition(":")[2] in inodes:
            return True
    return False


@pytest.mark.skipif(not Path("/proc/locks").is_file(), reason="needs Linux /proc/locks to see a blocked waiter")
def test_two_libraries_sharing_a_unit_built_at_once_compile_it_once(tmp_path):
    """Two processes build different libraries that share one unit into one cache: while the first
    compiles the shared unit, the second waits for that object's lock (it does not compile it again),
    then reuses the object; both libraries load and export their kernels."""
    shared = _src(tmp_path, ADD_SRC, "shared.c")
    a = _src(tmp_path, "void km_a__ref(void) {}\n", "a.c")
    b = _src(tmp_path, "void km_b__ref(void) {}\n", "b.c")
    out = tmp_path / "c"
    mark, gate, log = tmp_path / "compiling", tmp_path / "gate", tmp_path / "log"
    cc = _fake_cc(tmp_path, "gatedcc", GATED_LOGGING_CC)
    env = dict(os.environ, CC=str(cc), KM_TEST_MATCH="shared.c", KM_TEST_MARK=str(mark), KM_TEST_GATE=str(gate),
               KM_TEST_LOG=str(log))
    procs = []
    try:
        procs.append(subprocess.Popen([sys.executable, "-c", PAIR_SCRIPT, str(out), str(shared), str(a)], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        deadline = time.monotonic() + 120
        while not mark.exists() and time.monotonic() < deadline and procs[0].poll() is None:
            time.sleep(0.05)
        assert mark.exists(), "the first builder never compiled the shared unit"
        mark.unlink()
        procs.append(subprocess.Popen([sys.executable, "-c", PAIR_SCRIPT, str(out), str(shared), str(b)], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        deadline = time.monotonic() + 120
        while (not mark.exists() and not _blocked_on(tmp_path / "obj") and time.monotonic() < deadline
               and procs[1].poll() is None):
            time.sleep(0.05)
        assert not mark.exists(), "the second builder compiled the unit the first was compiling"
        assert _blocked_on(tmp_path / "obj"), "the second builder never waited for the shared object"
    finally:
        gate.touch()
    results = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), [r[1] for r in results]
    compiled = sorted(Path(line).name for line in log.read_text().split())
    assert compiled == ["a.c", "b.c", "shared.c"], compiled
    first, second = (ctypes.CDLL(r[0].strip()) for r in results)
    assert hasattr(first, "km_a__ref") and hasattr(second, "km_b__ref") and hasattr(second, "km_add_one__ref")


def test_build_shared_killed_mid_build_leaves_no_final_file(tmp_path):
    src = _src(tmp_path, ADD_SRC)
    out = tmp_path / "c"
    slow = _fake_cc(tmp_path, "slowcc",
                    'case " $* " in *" -c "*) touch "$KM_TEST_MARK"; sleep 60;; esac\nexec gcc "$@"\n')
    mark = tmp_path / "compiling"
    env = dict(os.environ, CC=str(slow), KM_TEST_MARK=str(mark))
    proc = subprocess.Popen([sys.executable, "-c", BUILD_SCRIPT, str(src), str(out)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while not mark.exists() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        assert mark.exists(), "the build never reached the compiler"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    assert _finals(out) == []
    # The same key builds cleanly afterwards (the wrapper's --version is gcc's, so the key is equal).
    again = build_shared([CompileUnit(src)], name="t", out_dir=out)
    assert again.is_file() and _finals(out) == [again]


def test_build_shared_sweeps_temp_dirs_of_dead_builders_under_the_key_lock(tmp_path):
    unit = CompileUnit(_src(tmp_path, ADD_SRC))
    first = build_shared([unit], name="t", out_dir=tmp_path / "c")
    first.unlink()
    left = first.parent / "km-build-left-by-a-killed-build"
    left.mkdir()
    (left / "u0_k.o").write_bytes(b"half")
    again = build_shared([unit], name="t", out_dir=tmp_path / "c")
    assert again == first and again.is_file()
    assert not left.exists()


def test_build_shared_second_builder_waits_for_the_lock_then_reuses(tmp_path):
    unit = CompileUnit(_src(tmp_path, ADD_SRC))
    out = tmp_path / "c"
    first = build_shared([unit], name="t", out_dir=out)
    key = first.parent.name
    first.unlink()
    holder = subprocess.Popen([sys.executable, "-c", LOCK_SCRIPT, str(out / (key + driver.LOCK_SUFFIX))],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        builder = subprocess.Popen([sys.executable, "-c", BUILD_SCRIPT, str(unit.source), str(out)],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(1.0)
        assert builder.poll() is None and not first.exists(), "the builder did not wait for the lock"
    finally:
        holder.kill()
        holder.wait(timeout=30)
    stdout, stderr = builder.communicate(timeout=120)
    assert builder.returncode == 0, stderr
    assert Path(stdout.strip()) == first and first.is_file()


LOCK_SCRIPT = """
import sys, time
from pathlib import Path
from kernelmap.build.driver import file_lock
with file_lock(Path(sys.argv[1])):
    print("locked", flush=True)
    time.sleep(120)
"""


def test_sanitizer_env_preloads_asan_and_ubsan():
    env = driver.sanitizer_env({"PATH": "/usr/bin"})
    libs = env["LD_PRELOAD"].split(":")
    assert "libasan" in libs[0] and any("libubsan" in p for p in libs)
    assert "detect_leaks=0" in env["ASAN_OPTIONS"] and env["KERNELMAP_SANITIZE"] == "1"


RUN_SCRIPT = """
import ctypes, sys
lib = ctypes.CDLL(sys.argv[1])
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
n = int(sys.argv[2])
buf = libc.malloc(16 * 4)
getattr(lib, sys.argv[3])(ctypes.c_void_p(buf), ctypes.c_int64(n))
print("finished", flush=True)
"""


def test_sanitize_build_out_of_bounds_write_is_caught_in_preloaded_subprocess(tmp_path):
    src = _src(tmp_path, OOB_SRC + ADD_SRC.split("\n", 1)[1], "oob.c")
    lib = build_shared([CompileUnit(src)], name="asan", out_dir=tmp_path / "c", sanitize=True)
    env = driver.sanitizer_env()
    ok = subprocess.run([sys.executable, "-c", RUN_SCRIPT, str(lib), "16", "km_add_one__ref"],
                        env=env, capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0 and "finished" in ok.stdout, ok.stderr[-2000:]
    bad = subprocess.run([sys.executable, "-c", RUN_SCRIPT, str(lib), "16", "km_oob__ref"],
                         env=env, capture_output=True, text=True, timeout=120)
    assert bad.returncode != 0 and "finished" not in bad.stdout
    assert "heap-buffer-overflow" in bad.stderr, bad.stderr[-2000:]


def test_reexec_under_sanitizer_restarts_process_with_preload(tmp_path):
    script = textwrap.dedent("""
        import os
        from kernelmap.build.driver import reexec_under_sanitizer
        reexec_under_sanitizer()
        print(os.environ.get("LD_PRELOAD", ""))
    """)
    env = dict(os.environ, KERNELMAP_SANITIZE="1")
    env.pop("LD_PRELOAD", None)
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "libasan" in proc.stdout


def test_reexec_under_sanitizer_without_env_is_noop(monkeypatch):
    monkeypatch.delenv("KERNELMAP_SANITIZE", raising=False)
    driver.reexec_under_sanitizer()


def test_sanitize_runner_execs_command_with_preload():
    code = "import os; print(os.environ['KERNELMAP_SANITIZE'], os.environ['LD_PRELOAD'])"
    proc = subprocess.run([sys.executable, "-m", "kernelmap.build.sanitize", sys.executable, "-c", code],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.startswith("1 ") and "libasan" in proc.stdout


def test_sanitize_runner_without_command_is_usage_error():
    proc = subprocess.run([sys.executable, "-m", "kernelmap.build.sanitize"], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2 and "usage:" in proc.stderr
