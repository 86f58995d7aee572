"""Error types shared by every stage: one-line, location-first messages with fields tests can assert on.

A `KernelmapError` is a user error (bad file, bad request, missing feature): the CLI prints its one
line (plus an optional `hint:` line) and exits 1 with no traceback. Anything else escaping the CLI
is a bug: it exits 3 with a traceback. This module formats messages; it does not decide exit codes.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "KernelmapError",
    "MapError",
    "PolicyError",
    "RequestError",
    "ResolutionError",
    "GGUFError",
    "TokenizerError",
    "CircuitError",
    "PlanError",
    "CodegenError",
    "BuildError",
    "TargetError",
    "ModelError",
    "LKBError",
    "closest",
]


def _show(value: Any) -> str:
    """Render an offending value compactly for a one-line message."""
    if isinstance(value, str):
        text = value if len(value) <= 60 else value[:57] + "..."
        return '"' + text.encode("unicode_escape").decode("ascii").replace('"', '\\"') + '"'
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


class KernelmapError(Exception):
    """A user-facing error: location first, then what, then found vs expected, then a hint.

    Fields: `path` (file), `pointer` (JSON pointer or field name inside it), `value` (what was
    found), `expected` (what was allowed), `hint` (what to do). Tests assert on these fields.
    """

    exit_code = 1

    def __init__(
        self,
        message: str,
        *,
        path: Any = None,
        pointer: str | None = None,
        value: Any = None,
        expected: Any = None,
        hint: str | None = None,
    ) -> None:
        self.message = message
        self.path = str(path) if path is not None else None
        self.pointer = pointer
        self.value = value
        self.expected = expected
        self.hint = hint
        super().__init__(self.line())

    def line(self) -> str:
        """The single message line (without the hint)."""
        parts = []
        if self.path:
            parts.append(self.path)
        if self.pointer is not None:
            parts.append(self.pointer or "/")
        head = ": ".join(parts)
        text = f"{head}: {self.message}" if head else self.message
        details = []
        if self.value is not None:
            details.append(f"found {_show(self.value)}")
        if self.expected is not None:
            exp = self.expected
            if isinstance(exp, (list, tuple, set, frozenset)):
                exp = ", ".join(str(e) for e in sorted(exp, key=str))
            details.append(f"expected {exp}")
        if details:
            text += " (" + "; ".join(details) + ")"
        return text.replace("\n", " ")

    def __str__(self) -> str:
        text = self.line()
        if self.hint:
            text += "\nhint: " + self.hint.replace("\n", " ")
        return text


class MapError(KernelmapError):
    """A kernel map (or the registry as a whole) is malformed."""


class PolicyError(KernelmapError):
    """A numerics policy file is malformed or has no rule for a request."""


class RequestError(KernelmapError):
    """A resolve request (CLI flags or a planner request) is malformed."""


class ResolutionError(KernelmapError):
    """The resolver refused: zero survivors, survivors across groups, or a tie."""


class GGUFError(KernelmapError):
    """A GGUF file is malformed, truncated, hostile or uses an unsupported feature."""


class TokenizerError(KernelmapError):
    """Tokenizer metadata is missing or inconsistent."""


class CircuitError(KernelmapError):
    """A circuit file is malformed or does not fit the model config."""


class PlanError(KernelmapError):
    """Scheduling, memory planning or ABI binding failed."""


class CodegenError(KernelmapError):
    """C generation refused its input."""


class BuildError(KernelmapError):
    """The C compiler failed or the cache could not be written."""


class TargetError(KernelmapError):
    """The CPU lacks a feature a selected variant requires, or an ISA name is unknown."""


class ModelError(KernelmapError):
    """A model cannot be compiled or run as asked (context too long, missing tensor, ...)."""


class LKBError(KernelmapError):
    """An LKB registry file (class chain, families, evidence) is malformed."""


def closest(word: str, allowed: list[str] | tuple[str, ...] | set[str]) -> str | None:
    """Return the allowed word closest to `word` (for 'closest: ...' hints), or None if none is near."""
    import difflib

    found = difflib.get_close_matches(word, sorted(allowed), n=1, cutoff=0.5)
    return found[0] if found else None
