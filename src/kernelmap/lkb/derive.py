"""LKB stage, `how` from the code: is a kernel variant an instantiation of a family body, a copy, or the reference?

Input: a variant's C source (and the headers it includes, under the kernel root). Output: a
`SourceShape` saying how the variant is realized and why, measured from the text: an *instantiation*
is a file that holds only `#include "km_lanes_<isa>.h"`, schedule `#define NAME <constant>`s,
`#include "<family>_body.h"` and the map's entry point whose body is at most MAX_STATEMENTS calls
into a function the body header defines (plus `(void)param;` markers); the body header itself holds no intrinsics, no ISA vector
types and no preprocessor test of an ISA macro. A `ref` variant is the *reference* (the contract's
scalar statement). Anything else is a *copy*. It also measures lines of C (files, lanes headers) for
the per-class line report. It reads no maps (coverage.py does) and judges no numerics.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["HOWS", "MAX_STATEMENTS", "SourceShape", "body_problems", "classify_source", "isa_headers", "lanes_files",
           "line_count", "point_how", "strip_comments"]

HOWS = ("reference", "instantiation", "copy")
MAX_STATEMENTS = 2

# Tokens that mark ISA-specific code: x86 intrinsics and vector types, NEON intrinsics and vector
# types (vaddq_f32, vld1q_s8, int8x16_t, float32x4x2_t), SVE (svfloat32_t, svdot_s32), builtins, asm.
_ISA_TOKEN = re.compile(
    r"\b(?:_mm\d*_\w+|_m_\w+|__m(?:64|128|256|512)\w*|__mmask\d+|_cvt\w+|_bextr\w*|_pdep\w*|_pext\w*"
    r"|v[a-z0-9]+_[suf](?:8|16|32|64)|v[a-z0-9]+_(?:p8|p16|bf16|f16)|(?:u?int|float|poly|bfloat)\d+x\d+(?:x\d)?_t"
    r"|sv[a-z0-9_]+|__builtin_(?:ia32|aarch64|neon|sve)\w*|__asm__|asm)\b")
# Predefined ISA macros a body may not test (it must not branch on the ISA).
_ISA_MACRO = re.compile(r"\b(?:__[A-Z0-9_]+__|__ARM_\w+|__AVX\w*|__SSE\w*|__FMA\w*|__F16C\w*|KL_ISA_NAME)\b")
_LANES_INCLUDE = re.compile(r'^#\s*include\s+"(km_lanes_[a-z0-9_]+\.h)"$')
_BODY_INCLUDE = re.compile(r'^#\s*include\s+"([a-z0-9_]+_body\.h)"$')
_SCHEDULE = re.compile(r"^#\s*define\s+([A-Z][A-Z0-9_]*)\s+([0-9A-Z_()+\-*/ ]+)$")
_ENTRY = re.compile(r"^\s*void\s+([A-Za-z_]\w*)\s*\(([^(){}]*)\)\s*\{([^{}]*)\}\s*$", re.S)
_CALL = re.compile(r"^(?:return\s+|\(void\)\s*)?([A-Za-z_]\w*)\s*\((.*)\)$", re.S)
_UNUSED = re.compile(r"^\(void\)\s*[A-Za-z_]\w*$")
_CONTROL = re.compile(r"\b(?:if|else|for|while|do|switch|case|goto|asm|__asm__)\b")


@dataclass(frozen=True)
class SourceShape:
    """How one variant source is realized, measured from its text."""

    source: str                  # relative to the kernel root
    how: str                     # reference | instantiation | copy
    why: str                     # one line: what the file is made of, or what makes it a copy
    lines: int                   # lines of the source file itself
    lanes: str | None = None     # instantiation: its lanes header (relative to the kernel root)
    body: str | None = None      # instantiation: its family body header
    schedule: tuple[str, ...] = field(default=())
    isa_headers: tuple[str, ...] = field(default=())   # copy: included headers with ISA code (its lines too)


# One token of C that strip_comments treats specially: a block comment (to its end or the text's), a line
# comment (not its newline), or a string / char literal (escapes skipped; to its end or the text's).
_COMMENT_OR_LITERAL = re.compile(r"/\*.*?(?:\*/|\Z)|//[^\n]*|\"(?:\\.|\\\Z|[^\"\\])*(?:\"|\Z)"
                                 r"|'(?:\\.|\\\Z|[^'\\])*(?:'|\Z)", re.S)


def _strip_one(m: re.Match[str]) -> str:
    tok = m.group(0)
    if tok.startswith("/*"):
        return "\n" * tok.count("\n") or " "
    return "" if tok.startswith("//") else tok


@functools.lru_cache(maxsize=4096)
def strip_comments(text: str) -> str:
    """C text without comments (string and char literals kept); newlines inside block comments kept.

    One regex pass, memoised per text: the LKB report strips the same few hundred files thousands of times
    (a character loop here was 58 of the 62 s of `kernelmap lkb`)."""
    return _COMMENT_OR_LITERAL.sub(_strip_one, text)


def _logical_lines(text: str) -> list[str]:
    return [ln.strip() for ln in text.replace("\\\n", " ").splitlines() if ln.strip()]


@functools.lru_cache(maxsize=1024)
def _read_stamped(path: str, stamp: tuple[int, int]) -> str | None:
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def _read(path: str) -> str | None:
    """A file's text (None when unreadable), cached per (path, mtime, size)."""
    try:
        st = Path(path).stat()
    except OSError:
        return None
    return _read_stamped(path, (st.st_mtime_ns, st.st_size))


def line_count(path: Path) -> int:
    """Lines of a file (0 when it cannot be read)."""
    text = _read(str(path))
    return 0 if text is None else len(text.splitlines())


_SYSTEM_HEADERS = frozenset({"stdint.h", "stddef.h", "string.h", "math.h", "float.h", "limits.h", "stdlib.h",
                             "stdbool.h"})


def _included(path: Path) -> list[tuple[str, Path | None]]:
    """The quoted includes of `path`, each resolved beside it or in the kernel root's common/ (None: not found)."""
    common = path.parent.parent / "common"
    out = []
    for name in re.findall(r'#\s*include\s*"([^"]+)"', strip_comments(_read(str(path)) or "")):
        out.append((name, next((c for c in (path.parent / name, common / name) if c.is_file()), None)))
    return out


def _closure(path: Path) -> list[Path]:
    """`path` and every header it includes (quoted, transitively, found ones), each once, `path` first."""
    out: list[Path] = []
    todo = [path]
    while todo:
        cur = todo.pop(0)
        if cur in out:
            continue
        out.append(cur)
        todo += [found for _name, found in _included(cur) if found is not None]
    return out


def body_problems(body: Path) -> list[str]:
    """Why a family body header is not ISA-free (empty when it is): it, or a header it includes (quoted,
    resolved beside the file or in common/), uses intrinsics or ISA vector types, tests an ISA macro in
    the preprocessor, includes a system header other than the C library's, or includes a missing file."""
    if _read(str(body)) is None:
        return [f"{body.name} not found"]
    for cur in _closure(body):
        code = strip_comments(_read(str(cur)) or "")
        token = _ISA_TOKEN.search(code)
        if token:
            return [f"{cur.name} uses ISA token {token.group(0)}"]
        for line in _logical_lines(code):
            if re.match(r"#\s*(?:if|ifdef|ifndef|elif)\b", line) and _ISA_MACRO.search(line):
                return [f"{cur.name} tests an ISA macro ({line[:60]})"]
            m = re.match(r"#\s*include\s*<([^>]+)>", line)
            if m and m.group(1) not in _SYSTEM_HEADERS:
                return [f"{cur.name} includes <{m.group(1)}>"]
        missing = [name for name, found in _included(cur) if found is None]
        if missing:
            return [f"{cur.name} includes {missing[0]}, which is not found"]
    return []


def isa_headers(path: Path, kernel_root: Path) -> tuple[str, ...]:
    """The headers `path` includes (quoted, transitively, beside it or in common/) that hold ISA code."""
    return tuple(sorted(h.resolve().relative_to(kernel_root.resolve()).as_posix() for h in _closure(path)[1:]
                        if _ISA_TOKEN.search(strip_comments(_read(str(h)) or ""))))


def classify_source(source: str, symbol: str, variant: str, kernel_root: Path) -> SourceShape:
    """Measure how the variant `variant` (entry point `symbol`) in `source` is realized."""
    path = kernel_root / source
    text = _read(str(path))
    if text is None:
        return SourceShape(source, "copy", "source file not found", 0)
    lines = len(text.splitlines())
    if variant == "ref":
        return SourceShape(source, "reference", "the contract's scalar statement (the oracle)", lines)

    def _copy(source: str, lines: int, why: str) -> SourceShape:
        return SourceShape(source, "copy", why, lines, isa_headers=isa_headers(path, kernel_root))
    code = strip_comments(text)
    directives = [ln for ln in _logical_lines(code) if ln.startswith("#")]
    rest = "\n".join(ln for ln in code.replace("\\\n", " ").splitlines() if not ln.strip().startswith("#"))
    lanes = body = None
    schedule: list[str] = []
    for line in directives:
        if m := _LANES_INCLUDE.match(line):
            if lanes or body:
                return _copy(source, lines, "more than one lanes include, or the lanes after the body")
            lanes = m.group(1)
        elif m := _BODY_INCLUDE.match(line):
            if body or not lanes:
                return _copy(source, lines, "more than one body include, or a body before its lanes")
            body = m.group(1)
        elif m := _SCHEDULE.match(line):
            if body:
                return _copy(source, lines, f"schedule parameter {m.group(1)} defined after the body include")
            schedule.append(m.group(1))
        else:
            return _copy(source, lines, f"directive other than lanes include, schedule #define, body include: "
                                        f"{line[:60]}")
    if not lanes or not body:
        return _copy(source, lines, "no " + ("lanes header include" if not lanes else "family body include"))
    token = _ISA_TOKEN.search(rest)
    if token:
        return _copy(source, lines, f"uses ISA token {token.group(0)}")
    entry = _ENTRY.match(rest)
    if entry is None:
        return _copy(source, lines, "code other than one entry point `void km_...(...) { ... }`")
    name, _params, block = entry.groups()
    if name != symbol:
        return _copy(source, lines, f"defines {name}, not the map's symbol {symbol}")
    if _CONTROL.search(block):
        return _copy(source, lines, "entry point has control flow")
    # `(void)param;` marks a parameter the family body does not need: no computation, not counted
    statements = [s.strip() for s in block.split(";") if s.strip() and not _UNUSED.match(s.strip())]
    if not statements or len(statements) > MAX_STATEMENTS:
        return _copy(source, lines, f"entry point has {len(statements)} statements (at most {MAX_STATEMENTS})")
    body_path = path.parent / body
    body_text = strip_comments(_read(str(body_path)) or "")
    calls_body = False
    for stmt in statements:
        call = _CALL.match(stmt)
        if call is None:
            return _copy(source, lines, f"entry statement is not a call: {' '.join(stmt.split())[:50]}")
        if re.search(rf"\b{re.escape(call.group(1))}\s*\([^;{{}}]*\)\s*\{{", body_text):
            calls_body = True
    if not calls_body:
        return _copy(source, lines, f"entry point calls no function defined in {body}")
    problems = body_problems(body_path)
    if problems:
        return _copy(source, lines, problems[0])
    lanes_path = (kernel_root / "common" / lanes).relative_to(kernel_root).as_posix()
    return SourceShape(source, "instantiation", f"{lanes} + {len(schedule)} schedule parameters + {body}", lines,
                       lanes_path, (path.parent / body).relative_to(kernel_root).as_posix(), tuple(schedule))


def lanes_files(lanes: str, kernel_root: Path) -> tuple[str, ...]:
    """A lanes header and the ISA lanes headers it includes (km_lanes_x86.h under avx2), not the shared
    interface km_lanes.h nor km_common.h: the lines a lanes implementation costs."""
    return tuple(sorted(h.resolve().relative_to(kernel_root.resolve()).as_posix()
                        for h in _closure(kernel_root / lanes) if h.name.startswith("km_lanes_")))


def point_how(shapes: Iterable[SourceShape]) -> str:
    """A point is the reference when all its variants are refs, an instantiation when all are
    instantiations, otherwise a copy."""
    hows = {s.how for s in shapes}
    if not hows:
        return "copy"
    if hows == {"reference"}:
        return "reference"
    if hows == {"instantiation"}:
        return "instantiation"
    return "copy"
