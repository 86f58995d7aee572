"""Build stage: compile C sources (each with its own variant flags) into a content-addressed shared library.

Input: a list of compile units (source path + variant cflags) and include dirs. Output: the path of
a `.so` in the user cache, named by a hash of every source byte, every header under the kernel tree
and the include dirs, every flag, the compiler's identity (resolved path, binary size and mtime,
`-v` output, the environment variables gcc reads) and the target. One builder per key at a time (a
lock file the kernel releases if the builder dies) and one compiler per object (a lock file per object
key, so concurrent builds of libraries sharing a unit compile it once); each builds in a temporary directory and
installs by rename, so concurrent builds of one key are safe and a failed or killed build leaves no
file under a final name. It does not decide which sources to build (the plan does) nor load the
library (the runtime does).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import fcntl
import functools
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kernelmap.errors import BuildError

__all__ = [
    "BASE_CFLAGS",
    "CompileUnit",
    "KERNEL_ROOT",
    "build_jobs",
    "build_shared",
    "cache_dir",
    "compiler_identity",
    "compiler_version",
    "file_lock",
    "reexec_under_sanitizer",
    "sanitize_enabled",
    "sanitizer_env",
    "shared_library_path",
]

KERNEL_ROOT = Path(__file__).resolve().parent.parent / "kernels"

# Numerics: no FMA contraction unless a contract says so, never -ffast-math.
BASE_CFLAGS = ("-std=c11", "-O3", "-fPIC", "-ffp-contract=off", "-Wall", "-Wextra", "-Werror")
SANITIZE_CFLAGS = ("-fsanitize=address,undefined", "-fno-omit-frame-pointer", "-fno-sanitize-recover=all")


@dataclass(frozen=True)
class CompileUnit:
    """One C source compiled with its variant's flags (e.g. -mavx2 -mfma)."""

    source: Path
    cflags: tuple[str, ...] = field(default_factory=tuple)
    prelude: str = ""  # C text force-included before the source (a unit's own prototypes), or ""


def compiler() -> str:
    """The C compiler to use: $CC or gcc."""
    return os.environ.get("CC", "gcc")


CROSS_COMPILERS = {"aarch64": ("KERNELMAP_CC_AARCH64", "aarch64-linux-gnu-gcc")}


def compiler_for(cflags: Sequence[str]) -> str:
    """The C compiler for sources built with `cflags`: the host's ($CC or gcc) unless the flags name
    another architecture (e.g. -march=armv8.2-a+dotprod: $KERNELMAP_CC_AARCH64 or aarch64-linux-gnu-gcc)."""
    import platform

    from kernelmap.isa_flags import flags_arch

    arch = flags_arch(cflags)
    host = {"amd64": "x86_64", "arm64": "aarch64"}.get(platform.machine().lower(), platform.machine().lower())
    if arch is None or arch == host or arch not in CROSS_COMPILERS:
        return compiler()
    env, default = CROSS_COMPILERS[arch]
    return os.environ.get(env, default)


@functools.cache
def compiler_version(cc: str | None = None) -> str:
    """The compiler's full version line (part of every cache key)."""
    cc = cc or compiler()
    try:
        out = subprocess.run([cc, "--version"], capture_output=True, text=True, check=True, timeout=30)
    except (OSError, subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
        raise BuildError("cannot run the C compiler", path=cc, value=str(exc),
                         hint="install gcc or set CC to a working C compiler") from exc
    return out.stdout.splitlines()[0].strip() if out.stdout else cc


# Environment variables that change what gcc/clang compile or link (header and library search paths).
COMPILER_ENV = ("CPATH", "C_INCLUDE_PATH", "GCC_EXEC_PREFIX", "COMPILER_PATH", "LIBRARY_PATH")


@functools.cache
def _compiler_probe(cc: str, resolved: str, size: int, mtime_ns: int) -> str:
    try:
        out = subprocess.run([cc, "-v"], capture_output=True, text=True, check=True, timeout=30)
    except (OSError, subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
        raise BuildError("cannot run the C compiler", path=cc, value=str(exc),
                         hint="install gcc or set CC to a working C compiler") from exc
    lines = (out.stderr + out.stdout).splitlines()
    return "\n".join(line.rstrip() for line in lines if line.strip() and not line.startswith("COLLECT_GCC="))


def compiler_identity(cc: str | None = None) -> str:
    """Everything that names the C compiler a build uses: part of every library and model cache key.

    The resolved path and the size and mtime of that file (a replaced compiler changes them), the
    compiler's `-v` report (version, target, configuration) and the environment variables it reads.
    The `-v` run is cached per process for one file identity.
    """
    cc = cc or compiler()
    found = shutil.which(cc)
    if found is None:
        raise BuildError("cannot run the C compiler: not found", path=cc,
                         hint="install gcc or set CC to a working C compiler")
    resolved = os.path.realpath(found)
    st = os.stat(resolved)
    report = _compiler_probe(cc, resolved, st.st_size, st.st_mtime_ns)
    env = [f"{name}={os.environ.get(name, '')}" for name in COMPILER_ENV]
    return "\n".join([f"cc={cc}", f"path={resolved}", f"size={st.st_size}", f"mtime_ns={st.st_mtime_ns}",
                      report, *env])


@contextlib.contextmanager
def file_lock(path: Path, *, waiting: Callable[[], None] | None = None) -> Iterator[None]:
    """Hold an exclusive flock on `path` (created if missing); the kernel drops it if this process dies.

    `waiting` is called once if another process holds the lock (so a caller can say why it pauses).
    """
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
    except OSError as exc:
        raise BuildError(f"cannot create a lock file: {exc.strerror}", path=path,
                         hint="check permissions and free space, or set KERNELMAP_CACHE") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if waiting is not None:
                waiting()
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def is_locked(path: Path) -> bool:
    """True if some process holds the flock on `path` (used to tell live temp dirs from dead ones)."""
    try:
        fd = os.open(path, os.O_RDWR | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def sanitize_enabled() -> bool:
    """True when KERNELMAP_SANITIZE=1 asks for ASan+UBSan builds."""
    return os.environ.get("KERNELMAP_SANITIZE", "") not in ("", "0")


def _runtime_library(cc: str, name: str) -> str:
    """Absolute path of a compiler runtime library (libasan.so, ...) or "" if the compiler has none."""
    try:
        out = subprocess.run([cc, f"-print-file-name={name}"], capture_output=True, text=True,
                             check=True, timeout=30).stdout.strip()
    except (OSError, subprocess.CalledProcessError, subprocess.TimeoutExpired):
        return ""
    return out if os.path.isabs(out) and os.path.exists(out) else ""


def sanitizer_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment to (re-)exec a Python process in so it can load ASan+UBSan-built kernel libraries.

    An ASan shared object loaded by ctypes needs the ASan runtime first in the process, so the
    runtime libraries go into LD_PRELOAD; leak checking is off (the interpreter itself leaks by
    design) and any report aborts the process with a non-zero exit.
    """
    env = dict(os.environ if base is None else base)
    cc = compiler()
    libs = [_runtime_library(cc, n) for n in ("libasan.so", "libubsan.so")]
    if not all(libs):
        raise BuildError("the C compiler has no ASan/UBSan runtime libraries", path=cc,
                         value="libasan.so, libubsan.so", hint="install libasan and libubsan for this compiler")
    preload = [p for p in env.get("LD_PRELOAD", "").split(":") if p and p not in libs]
    env["LD_PRELOAD"] = ":".join([*libs, *preload])
    env["ASAN_OPTIONS"] = env.get("ASAN_OPTIONS") or "detect_leaks=0:abort_on_error=0:exitcode=86"
    env["UBSAN_OPTIONS"] = env.get("UBSAN_OPTIONS") or "print_stacktrace=1:halt_on_error=1:exitcode=87"
    env["KERNELMAP_SANITIZE"] = "1"
    return env


def reexec_under_sanitizer() -> None:
    """If KERNELMAP_SANITIZE=1 and the ASan runtime is not preloaded, replace this process by itself under it.

    Call it first thing in a test session (a conftest `pytest_configure`), so `make sanitize` works
    with a plain `KERNELMAP_SANITIZE=1 pytest ...` command line. A no-op otherwise.
    """
    if not sanitize_enabled() or "libasan" in os.environ.get("LD_PRELOAD", ""):
        return
    env = sanitizer_env()
    argv = list(getattr(sys, "orig_argv", None) or [sys.executable, *sys.argv])
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, [sys.executable, *argv[1:]], env)


def cache_dir() -> Path:
    """Root of the build cache ($KERNELMAP_CACHE or the user cache dir)."""
    env = os.environ.get("KERNELMAP_CACHE")
    if env:
        return Path(env)
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("kernelmap"))


def _headers(include_dirs: Iterable[Path]) -> list[tuple[int, str, Path]]:
    """(dir index, path inside the dir, file) of every header under the given dirs, in search order."""
    found: list[tuple[int, str, Path]] = []
    for i, inc in enumerate(include_dirs):
        if inc.is_dir():
            found.extend((i, str(h.relative_to(inc)), h) for h in sorted(inc.rglob("*.h")))
    return found


def _headers_digest(dirs: Sequence[Path]) -> bytes:
    """sha256 over (dir index, relative path, content hash) of every header under `dirs`."""
    h = hashlib.sha256(b"headers\0")
    for i, rel, header in _headers(dirs):
        h.update(f"hdr\0{i}\0{rel}\0".encode() + hashlib.sha256(header.read_bytes()).digest())
    return h.digest()


PRELUDE_NAME = "km_unit_prototypes.h"  # a unit's `prelude` is force-included under this name


def _unit_key(unit: CompileUnit, headers: bytes, extra: Sequence[str], target: str, ident: str) -> str:
    """The object cache key of one unit: its source bytes, prelude, flags, every header it could
    include (`headers`), the compiler's identity and the target."""
    h = hashlib.sha256(b"kernelmap-obj-v1\0")
    h.update(ident.encode() + b"\0" + target.encode() + b"\0")
    for flag in (*BASE_CFLAGS, *extra, "|", *unit.cflags):
        h.update(flag.encode() + b"\0")
    h.update(b"unit\0" + unit.source.name.encode() + b"\0")
    h.update(hashlib.sha256(unit.source.read_bytes()).digest())
    h.update(b"prelude\0" + hashlib.sha256(unit.prelude.encode()).digest())
    h.update(headers)
    return h.hexdigest()[:32]


def _lib_key(unit_keys: Sequence[str], link_flags: Sequence[str], sanitize: bool, ident: str) -> str:
    h = hashlib.sha256(b"kernelmap-build-v3\0")
    h.update(ident.encode() + b"\0" + f"sanitize={sanitize}".encode() + b"\0")
    for flag in link_flags:
        h.update(b"link\0" + flag.encode() + b"\0")
    for key in unit_keys:
        h.update(b"obj\0" + key.encode() + b"\0")
    return h.hexdigest()[:24]


_MAX_MESSAGE_LINES = 30


def _run(cmd: list[str], what: str, cwd: Path | None = None, path: Path | str | None = None) -> None:
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd)
    except OSError as exc:
        raise BuildError(f"{what} failed: cannot run {cmd[0]}: {exc}", path=cmd[0],
                         hint="install gcc or set CC to a working C compiler") from exc
    if proc.returncode != 0:
        lines = (proc.stderr or proc.stdout).strip().splitlines()
        if len(lines) > _MAX_MESSAGE_LINES:
            lines = [*lines[:_MAX_MESSAGE_LINES], f"... ({len(lines) - _MAX_MESSAGE_LINES} more lines)"]
        msg = " | ".join(line.rstrip() for line in lines if line.strip())
        raise BuildError(f"{what} failed: {msg}", path=path if path is not None else (cmd[-1] if what == "compile" else None),
                         hint=f"command: {' '.join(cmd)}; nothing was installed in the cache")


def build_jobs() -> int:
    """Compiler processes to run at once: $KERNELMAP_JOBS, else the CPUs this process may run on."""
    env = os.environ.get("KERNELMAP_JOBS", "")
    if env.isdigit() and int(env) > 0:
        return int(env)
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def _cost(unit: CompileUnit) -> int:
    """A rough compile-cost estimate (bytes of the source and the quoted headers beside it that it
    includes) so the biggest units start first and the parallel build ends sooner."""
    try:
        text = unit.source.read_text(errors="replace")
    except OSError:
        return 0
    size = len(text)
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("#include \""):
            header = unit.source.parent / line.split('"')[1]
            if header.is_file():
                size += header.stat().st_size
    return size


Counter = Callable[[int, int], None]  # (units done, units in all)

# Builds in one process may run at once (the compiler builds the kernel library while it plans the
# model): they share `build_jobs()` compiler slots, and one object is compiled by one thread at a time.
_SLOTS_LOCK = threading.Lock()
_SLOTS: threading.BoundedSemaphore | None = None
_INFLIGHT: dict[Path, threading.Lock] = {}


@contextlib.contextmanager
def _compiler_slot() -> Iterator[None]:
    global _SLOTS
    with _SLOTS_LOCK:
        if _SLOTS is None:
            _SLOTS = threading.BoundedSemaphore(build_jobs())
        slots = _SLOTS
    with slots:
        yield


@contextlib.contextmanager
def _claim(obj: Path) -> Iterator[bool]:
    """Hold the in-process claim on compiling `obj`; yields False if it exists once the claim is held."""
    with _SLOTS_LOCK:
        lock = _INFLIGHT.setdefault(obj, threading.Lock())
    with lock:
        yield not obj.is_file()


def _remove_dead_temps(obj_dir: Path) -> None:
    """Delete object temp files of compilers whose process is gone (the pid is part of the name)."""
    for tmp in obj_dir.glob(".*.tmp.o"):
        try:
            pid = int(tmp.name.split(".")[2])
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


def _object_keys(units: Sequence[CompileUnit], include_dirs: Sequence[Path], extra: Sequence[str], target: str,
                 ident: str) -> list[str]:
    """The object key of each unit (see `_unit_key`); `include_dirs` already holds the common dir."""
    digests: dict[tuple[Path, ...], bytes] = {}
    keys = []
    for unit in units:
        if not unit.source.is_file():
            raise BuildError("source file not found", path=unit.source)
        # Headers on the include path, those beside the source (quoted includes search there first)
        # and every header of the kernel tree (a source may include one by a relative path).
        dirs = tuple(dict.fromkeys([*include_dirs, unit.source.parent, KERNEL_ROOT]))
        if dirs not in digests:
            digests[dirs] = _headers_digest(dirs)
        keys.append(_unit_key(unit, digests[dirs], extra, target, ident))
    return keys


def _compile_objects(cc: str, units: Sequence[CompileUnit], keys: Sequence[str], include_dirs: Sequence[Path],
                     extra: Sequence[str], obj_dir: Path, progress: Counter | None) -> list[Path]:
    """Compile each unit to `obj_dir/<key>.o` unless it exists, biggest first, `build_jobs()` at a time.

    An object is compiled under its own lock file (`.<key>.lock`, never deleted), so of concurrent
    builders (threads or processes) one compiles it and the others wait and reuse it; it is written to
    a temp file beside its final name and renamed into place, so a killed compile leaves no file under
    a final name. The first failing unit (in unit order) raises BuildError after the running compiles
    finish.
    """
    objs = [obj_dir / f"{key}.o" for key in keys]
    todo = sorted((i for i in range(len(units)) if not objs[i].is_file()), key=lambda i: -_cost(units[i]))
    total = len(units)
    done = total - len(todo)
    if progress is not None:
        progress(done, total)
    if not todo:
        return objs
    try:
        obj_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BuildError(f"cannot write the build cache: {exc.strerror}", path=obj_dir,
                         hint="check permissions and free space, or set KERNELMAP_CACHE") from None
    _remove_dead_temps(obj_dir)
    incs = [f"-I{p}" for p in include_dirs]

    def one(i: int) -> None:
        unit = units[i]
        with _claim(objs[i]) as mine, file_lock(obj_dir / f".{keys[i]}.lock"):
            # one compiler per object across processes too: a builder that waited finds it done
            if not mine or objs[i].is_file():
                return
            tmp = obj_dir / f".{keys[i]}.{os.getpid()}.{threading.get_ident()}.tmp.o"
            try:
                with tempfile.TemporaryDirectory(prefix="km-cc-") as cwd, _compiler_slot():
                    flags = list(unit.cflags)
                    if unit.prelude:
                        (Path(cwd) / PRELUDE_NAME).write_text(unit.prelude)
                        flags += ["-include", PRELUDE_NAME]
                    # cwd is a fresh temp dir: `-include NAME` searches the working directory first.
                    _run([cc, *BASE_CFLAGS, *extra, *flags, *incs, "-c", "-o", str(tmp), str(unit.source)],
                         "compile", cwd=Path(cwd), path=unit.source)
                os.replace(tmp, objs[i])
            finally:
                with contextlib.suppress(OSError):
                    tmp.unlink()

    errors: dict[int, BaseException] = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=min(build_jobs(), len(todo))) as pool:
        futures = {pool.submit(one, i): i for i in todo}
        for fut in concurrent.futures.as_completed(futures):
            if fut.cancelled():
                continue
            exc = fut.exception()
            if exc is not None:
                errors[futures[fut]] = exc
                for other in futures:  # start no further unit; the running ones finish
                    other.cancel()
            else:
                done += 1
                if progress is not None:
                    progress(done, total)
    if errors:
        raise errors[min(errors)]
    return objs


@dataclass(frozen=True)
class _Plan:
    """What one build_shared call builds: its units' object keys and the library's final path."""

    cc: str
    includes: list[Path]
    extra: list[str]
    unit_keys: list[str]
    key: str
    final: Path
    obj_dir: Path
    sanitize: bool


def _plan(units: Sequence[CompileUnit], name: str, include_dirs: Sequence[Path], extra_cflags: Sequence[str],
          link_flags: Sequence[str], target: str, sanitize: bool | None, out_dir: Path | None) -> _Plan:
    if not units:
        raise BuildError("nothing to build: no compile units", path=name)
    for unit in units:
        if not unit.source.is_file():
            raise BuildError("source file not found", path=unit.source)
    if sanitize is None:
        sanitize = sanitize_enabled()
    lib_root = out_dir or cache_dir() / "lib"
    cc = compiler()
    ident = compiler_identity(cc)
    includes = [KERNEL_ROOT / "common", *include_dirs]
    extra = [*extra_cflags, *(SANITIZE_CFLAGS if sanitize else ())]
    unit_keys = _object_keys(units, includes, extra, target, ident)
    key = _lib_key(unit_keys, link_flags, sanitize, ident)
    return _Plan(cc, includes, extra, unit_keys, key, lib_root / key / f"lib{name}.so", lib_root.parent / "obj",
                 sanitize)


def shared_library_path(units: Sequence[CompileUnit], *, name: str = "kernels", include_dirs: Sequence[Path] = (),
                        extra_cflags: Sequence[str] = (), link_flags: Sequence[str] = (), target: str = "",
                        sanitize: bool | None = None, out_dir: Path | None = None) -> Path:
    """The path `build_shared` with these arguments returns, without building anything (so a library
    that links this one can be planned, and its objects compiled, while this one is built)."""
    return _plan(units, name, include_dirs, extra_cflags, link_flags, target, sanitize, out_dir).final


def build_shared(
    units: Sequence[CompileUnit],
    *,
    name: str = "kernels",
    include_dirs: Sequence[Path] = (),
    extra_cflags: Sequence[str] = (),
    link_flags: Sequence[str] = (),
    target: str = "",
    sanitize: bool | None = None,
    out_dir: Path | None = None,
    progress: Counter | None = None,
    before_link: Callable[[], object] | None = None,
) -> Path:
    """Compile `units` (objects cached per unit) and link them into `<cache>/lib/<hash>/lib<name>.so`
    (or reuse it); return its path. `progress(done, total)` is told of each unit compiled or reused;
    `before_link()` is called once the objects exist and before the link (or the reuse of a linked
    library): a library linking another that is being built elsewhere waits for it there."""
    plan = _plan(units, name, include_dirs, extra_cflags, link_flags, target, sanitize, out_dir)
    final, final_dir, key = plan.final, plan.final.parent, plan.key
    if final.is_file():
        if before_link is not None:
            before_link()
        if progress is not None:
            progress(len(units), len(units))
        return final
    try:
        final_dir.parent.mkdir(parents=True, exist_ok=True)
        # The lock sits beside the key dir (never inside it, never deleted), so removing a failed
        # build's empty dir cannot race with a process waiting for the lock.
        with file_lock(final_dir.with_name(key + LOCK_SUFFIX)):
            if final.is_file():  # another process built it while we waited
                if before_link is not None:
                    before_link()
                if progress is not None:
                    progress(len(units), len(units))
                return final
            final_dir.mkdir(exist_ok=True)
            _sweep_stale(final_dir)
            with tempfile.TemporaryDirectory(prefix="km-build-", dir=final_dir) as tmp:
                objs = _compile_objects(plan.cc, units, plan.unit_keys, plan.includes, plan.extra, plan.obj_dir,
                                        progress)
                if before_link is not None:
                    before_link()
                tmp_so = Path(tmp) / final.name
                _run([plan.cc, "-shared", *(SANITIZE_CFLAGS if plan.sanitize else ()), "-o", str(tmp_so),
                      *map(str, objs), *link_flags, "-lm"], "link", cwd=Path(tmp))
                # The rename is the only step that creates the final name: atomic on one filesystem.
                os.chmod(tmp_so, 0o755)
                os.replace(tmp_so, final)
    except BuildError:
        _remove_if_empty(final_dir)
        raise
    except OSError as exc:
        _remove_if_empty(final_dir)
        raise BuildError(f"cannot write the build cache: {exc.strerror}", path=final_dir,
                         hint="check permissions and free space, or set KERNELMAP_CACHE") from exc
    return final


LOCK_SUFFIX = ".lock"


def _sweep_stale(final_dir: Path) -> None:
    """Remove temporary build dirs that killed builds left behind. Call it holding the dir's lock:
    every builder holds that lock while its temp dir exists, so any temp dir found then is dead."""
    for tmp in final_dir.glob("km-build-*"):
        shutil.rmtree(tmp, ignore_errors=True)


def _remove_if_empty(path: Path) -> None:
    try:
        path.rmdir()
    except OSError:
        pass
