"""LKB stage, step profiles: the per-op time of one model step at C1/C16/C128, loaded from JSON or measured.

Input: a profile JSON (`kernelmap.lkb_profile/1`: rows -> list of {op, provider, variant, seconds}) or a
model path for `measure`. Output: `{rows: [ProfileEntry, ...]}`. `measure` is the hook the generated
program's per-op timing mode will fill; until then it refuses with an LKBError. It does not classify.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kernelmap.errors import LKBError
from kernelmap.lkb import schemas
from kernelmap.lkb._io import read_json

__all__ = ["PROFILE_SCHEMA", "ProfileEntry", "load_profile", "measure"]

PROFILE_SCHEMA = "kernelmap.lkb_profile/1"


@dataclass(frozen=True)
class ProfileEntry:
    """One op instance of a step: its label, the provider variant that ran it, and its seconds."""

    op: str
    provider: str
    variant: str
    seconds: float


def _entries(items: list[dict]) -> list[ProfileEntry]:
    return [ProfileEntry(e["op"], e["provider"], e["variant"], float(e["seconds"])) for e in items]


def load_profile(path: Path | str) -> dict[int, list[ProfileEntry]]:
    """A profile file as {rows: entries}; schema errors name the file and the JSON pointer."""
    data = read_json(path, schemas.PROFILE)
    return {int(rows): _entries(items) for rows, items in sorted(data["rows"].items(), key=lambda kv: int(kv[0]))}


def measure(model_path: Path | str, rows: int) -> list[ProfileEntry]:
    """Per-op seconds of one step of the generated program for `model_path` at `rows` rows (not built yet)."""
    raise LKBError("per-op profiling is not available yet", path=model_path, pointer="rows",
                   value=rows, hint="pass --profile FILE (format in docs/LKB.md) until the generated "
                   "program has a per-op timing mode")
