"""LKB stage, evidence: rows of the measurements file keyed to (class, family point, rows), and the envelopes.

Input: a measurements TOML written by `kernelmap bench` ([[measurement]] class, provider, variant,
rows, threads, shape, metric, value, machine, date) and the provider -> point assignment. Output:
`Measurement` rows and per-family evidence envelopes. Evidence counts only on the class that measured
it: every query takes the class and never looks at another's rows. It does not run benchmarks.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from kernelmap.lkb import schemas
from kernelmap.lkb._io import read_toml

__all__ = ["Envelope", "Measurement", "ROWS", "bandwidth", "envelope", "load_measurements"]

ROWS = (1, 16, 128)
BANDWIDTH_PROVIDER = "stream_read"


@dataclass(frozen=True)
class Measurement:
    """One measurement row as `kernelmap bench` wrote it."""

    cls: str
    provider: str
    variant: str
    rows: int
    threads: int
    shape: str
    metric: str
    value: float
    machine: str
    date: str


def load_measurements(path: Path | str) -> list[Measurement]:
    """Rows of a measurements file (schema-checked); a missing file is an empty list."""
    path = Path(path)
    if not path.exists():
        return []
    data = read_toml(path, schemas.MEASUREMENTS)
    return [Measurement(r["class"], r["provider"], r["variant"], int(r["rows"]), int(r["threads"]), r["shape"],
                        r["metric"], float(r["value"]), r["machine"], str(r["date"]))
            for r in data.get("measurement", [])]


@dataclass(frozen=True)
class Envelope:
    """The set of (class, point id, rows) with at least one record, per family id."""

    by_family: dict[str, frozenset[tuple[str, str, int]]]

    def measured(self, cls: str, family: str, point: str, rows: int) -> bool:
        """True only when `cls` itself measured `point` at `rows` (another class's record never counts)."""
        return (cls, point, rows) in self.by_family.get(family, frozenset())

    def on_class(self, cls: str, family: str) -> frozenset[tuple[str, int]]:
        """(point, rows) pairs measured on `cls` for `family`."""
        return frozenset((p, r) for c, p, r in self.by_family.get(family, frozenset()) if c == cls)


def envelope(rows: Iterable[Measurement], assignment: dict[tuple[str, str], tuple[str, str]]) -> Envelope:
    """Map each row's (provider, variant) to its (family, point) and collect the envelope per family."""
    out: dict[str, set[tuple[str, str, int]]] = {}
    for row in rows:
        key = assignment.get((row.provider, row.variant))
        if key is None:
            continue
        family, point = key
        out.setdefault(family, set()).add((row.cls, point, row.rows))
    return Envelope({k: frozenset(v) for k, v in out.items()})


def bandwidth(rows: Iterable[Measurement], cls: str) -> dict[int, float]:
    """Best streaming-read GB/s per thread count measured on `cls`."""
    out: dict[int, float] = {}
    for row in rows:
        if row.cls == cls and row.provider == BANDWIDTH_PROVIDER and row.metric == "gbps":
            out[row.threads] = max(out.get(row.threads, 0.0), row.value)
    return out
