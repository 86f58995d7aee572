"""What this test run could not check for lack of CPU features, for one line at the end of the run.

Tests that skip a kernel variant (tests/kernels/kernel_harness.py) or an ISA level of the compiled
model (tests/e2e/test_isa_levels.py) because the target lacks features note it here, and
tests/conftest.py prints `summary_line()` in pytest's terminal summary, so a run on a host without
AVX-512 says which variants it did not check instead of passing quietly.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["note_unchecked", "summary_line", "unchecked"]

_UNCHECKED: dict[str, frozenset[str]] = {}


def note_unchecked(what: str, missing: Iterable[str]) -> None:
    """Record that `what` (e.g. "argmax_f32[avx512]") was not run because the target lacks `missing`."""
    _UNCHECKED[what] = _UNCHECKED.get(what, frozenset()) | frozenset(missing)


def unchecked() -> dict[str, frozenset[str]]:
    """Everything noted so far: what -> the features it lacked."""
    return dict(_UNCHECKED)


def summary_line() -> str | None:
    """One line naming every unchecked variant and the features missing, or None if nothing was skipped."""
    if not _UNCHECKED:
        return None
    missing = sorted(set().union(*_UNCHECKED.values()))
    return (f"NOT CHECKED on this CPU (lacks {', '.join(missing)}): {len(_UNCHECKED)} variants/levels: "
            + ", ".join(sorted(_UNCHECKED)))
