"""Map stage side system: the functions a kernel C source really defines, as the C compiler sees them.

Input: C sources with the flags each is compiled with (a variant's cflags) and the kernel root.
Output: every external (non-static) function each defines, with its return type and its parameters'
names and types, read from `gcc -aux-info` after the preprocessor (so macros and typedefs are the
compiler's, not a guess), or the compiler's first error line. Results are cached in the build cache,
keyed by the source, every header it can include, the flags and the compiler's version. The audit
compares them with each map's call_abi and looks for exported helpers that look like kernels. It
never compiles object code nor trusts a map.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import tempfile
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CFunction", "CParam", "SourceDefs", "c_type", "definitions", "parse_aux_info"]

_CACHE_VERSION = b"kernelmap-cdefs-v1\0"
# "/* FILE:LINE:NF */ extern RET NAME (PARAMS); /* ... */": a new-style (N) or old-style (O) definition (F).
_AUX_LINE = re.compile(r"^/\* (?P<file>.+):(?P<line>\d+):[NO]F \*/ (?P<storage>extern|static) (?P<decl>.*?);"
                       r"(?: /\*.*\*/)?$")
_DECL = re.compile(r"^(?P<ret>.*?)\b(?P<name>[A-Za-z_]\w*) \((?P<params>.*)\)$")
_PARAM = re.compile(r"^(?P<type>.*?)\b(?P<name>[A-Za-z_]\w*)$")


@dataclass(frozen=True)
class CParam:
    """One parameter of a C definition: its name and its type (normalised by `c_type`)."""

    name: str
    type: str


@dataclass(frozen=True)
class CFunction:
    """One external function a source defines."""

    name: str
    ret: str
    params: tuple[CParam, ...]
    line: int


@dataclass(frozen=True)
class SourceDefs:
    """What one source defines with one set of flags, or why the compiler could not read it."""

    source: Path
    cflags: tuple[str, ...]
    functions: dict[str, CFunction]
    error: str | None = None


def c_type(text: str) -> str:
    """A C type in one spelling: single spaces, `T *` pointers, and no top-level qualifier (a
    parameter declared `const int64_t M` or `float *const y` has the prototype type `int64_t`/`float *`)."""
    t = re.sub(r"\s+", " ", text).strip()
    t = re.sub(r"\s*\*\s*", " *", t).replace("* *", "**").strip()
    if "*" in t:
        head, _, tail = t.rpartition("*")
        if tail.strip() in ("const", "volatile", "restrict", "const restrict", "restrict const"):
            t = head + "*"
    else:
        t = " ".join(w for w in t.split() if w not in ("const", "volatile"))
    return t.strip()


def _split_params(text: str) -> list[str]:
    out, depth, cur = [], 0, []
    for ch in text:
        if ch == "," and depth == 0:
            out.append("".join(cur).strip())
            cur = []
            continue
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        cur.append(ch)
    if "".join(cur).strip():
        out.append("".join(cur).strip())
    return out


def parse_aux_info(text: str, source: Path) -> dict[str, CFunction]:
    """The external functions defined in `source` itself (not in its headers), from -aux-info output."""
    prefix = f"/* {source}:"  # gcc names the file as it was given on the command line
    found: dict[str, CFunction] = {}
    for line in text.splitlines():
        if not line.startswith(prefix):
            continue
        m = _AUX_LINE.match(line)
        if m is None or m.group("storage") != "extern" or m.group("file") != str(source):
            continue
        d = _DECL.match(m.group("decl").strip())
        if d is None:
            continue
        params: list[CParam] = []
        raw = d.group("params").strip()
        for item in ([] if raw in ("", "void") else _split_params(raw)):
            p = _PARAM.match(item)
            # an unnamed or function-pointer parameter keeps its text as its type and has no name
            params.append(CParam(p.group("name"), c_type(p.group("type"))) if p and p.group("type").strip()
                          else CParam("", c_type(item)))
        found[d.group("name")] = CFunction(d.group("name"), c_type(d.group("ret")), tuple(params),
                                           int(m.group("line")))
    return found


def _headers(dirs: Iterable[Path]) -> list[Path]:
    out: list[Path] = []
    for d in dict.fromkeys(dirs):
        if d.is_dir():
            out.extend(sorted(d.rglob("*.h")))
    return out


def _key(source: Path, cflags: Sequence[str], include_dirs: Sequence[Path], cc: str) -> str:
    from kernelmap.build.driver import compiler_version

    h = hashlib.sha256(_CACHE_VERSION)
    h.update(compiler_version(cc).encode() + b"\0" + str(source.resolve()).encode() + b"\0")
    for flag in cflags:
        h.update(flag.encode() + b"\0")
    h.update(hashlib.sha256(source.read_bytes()).digest())
    for header in _headers([*include_dirs, source.parent]):
        h.update(str(header).encode() + b"\0" + hashlib.sha256(header.read_bytes()).digest())
    return h.hexdigest()[:32]


def _read(source: Path, cflags: tuple[str, ...], include_dirs: Sequence[Path], cache: Path | None) -> SourceDefs:
    from kernelmap.build.driver import compiler_for

    if not source.is_file():
        return SourceDefs(source, cflags, {}, "source file not found")
    cc = compiler_for(cflags)
    key = _key(source, cflags, include_dirs, cc)
    cached = cache / f"{key}.json" if cache is not None else None
    if cached is not None and cached.is_file():
        try:
            doc = json.loads(cached.read_text(encoding="utf-8"))
            return SourceDefs(source, cflags, parse_aux_info(doc["aux"], source), doc["error"])
        except (OSError, ValueError, KeyError):
            pass  # a damaged entry is recomputed
    with tempfile.TemporaryDirectory(prefix="km-cdefs-") as tmp:
        aux = Path(tmp) / "aux.txt"
        cmd = [cc, "-std=c11", "-fsyntax-only", *cflags, *(f"-I{d}" for d in include_dirs),
               "-aux-info", str(aux), str(source)]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return SourceDefs(source, cflags, {}, f"cannot run {cc}: {exc} (make test installs the cross compilers)")
        error = None
        if proc.returncode != 0:
            lines = [ln for ln in (proc.stderr or proc.stdout).splitlines() if "error" in ln] or ["compile failed"]
            error = lines[0].strip()
        text = aux.read_text(encoding="utf-8", errors="replace") if aux.is_file() else ""
        if error is None and not text:
            error = f"{cc} wrote no -aux-info (the audit's C definition check needs gcc)"
        prefix = f"/* {source}:"
        text = "\n".join(ln for ln in text.splitlines() if ln.startswith(prefix))  # the source's own lines
    if cached is not None:
        try:
            cache.mkdir(parents=True, exist_ok=True)
            fd, tmp_name = tempfile.mkstemp(prefix=".cdefs.", suffix=".tmp", dir=cache)
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump({"aux": text, "error": error}, fh)
            os.replace(tmp_name, cached)
        except OSError:
            pass  # the cache is an optimisation; a read-only cache only costs time
    return SourceDefs(source, cflags, parse_aux_info(text, source), error)


def definitions(units: Iterable[tuple[Path, tuple[str, ...]]], kernel_root: Path, *,
                use_cache: bool = True) -> dict[tuple[Path, tuple[str, ...]], SourceDefs]:
    """What every (source, cflags) unit defines; read in parallel, one compiler process per unit."""
    from kernelmap.build.driver import cache_dir

    todo = list(dict.fromkeys(units))
    include_dirs = [kernel_root / "common"]
    cache = cache_dir() / "cdefs" if use_cache else None
    with ThreadPoolExecutor(max_workers=max(1, os.cpu_count() or 1)) as pool:
        results = list(pool.map(lambda u: _read(u[0], u[1], include_dirs, cache), todo))
    return dict(zip(todo, results, strict=True))
