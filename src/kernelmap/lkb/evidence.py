"""LKB stage, evidence: rows of the measurements file keyed to (class, family point, rows), and the envelopes.

Input: a measurements TOML written by `kernelmap bench` ([[measurement]] class, provider, variant,
rows, threads, shape, metric, value, machine, date) and the provider -> point assignment. Output:
`Measurement` rows, per-family evidence envelopes, and the variant ranking the resolver uses
(`VariantEvidence.choose`: the committed lkb/classes/<class>/measurements.toml ranks the variants of
one provider where repeated records show a difference beyond their spread). Evidence counts only on
the class that measured it: every query takes the class and never looks at another's rows. It does
not run benchmarks.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from kernelmap.lkb import schemas
from kernelmap.lkb._io import read_toml

__all__ = ["Envelope", "Measurement", "MIN_RECORDS", "ROWS", "VariantChoice", "VariantEvidence", "bandwidth",
           "bench_shape", "class_evidence_path", "envelope", "load_measurements", "load_variant_evidence"]

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


# ---- variant ranking from evidence (issue 16 item 5) -------------------------------------------------

CLASSES_DIR = Path(__file__).resolve().parent / "classes"
EVIDENCE_FILE = "measurements.toml"
RANK_METRIC = "median_us"  # lower is faster; the cold-weights metric `kernelmap bench` records by default
MIN_RECORDS = 3  # repeated records of one point needed before its spread counts as the noise


def class_evidence_path(cls: str) -> Path:
    """Where the committed evidence of a CPU class lives: lkb/classes/<class>/measurements.toml."""
    return CLASSES_DIR / cls / EVIDENCE_FILE


@dataclass(frozen=True)
class VariantChoice:
    """What evidence says about the variants of one provider at one request: the winner (None when
    priority decides) and a one-line reason naming the file, shape, rows and the measured ranges."""

    winner: str | None
    reason: str


@dataclass(frozen=True)
class VariantEvidence:
    """The measurements of one CPU class, as the resolver ranks variants with them.

    Only rows whose class is `cls` count (another class's records never rank variants here). Records
    are grouped per point (provider, variant, shape, rows, threads) of metric `median_us`; a point
    with fewer than MIN_RECORDS records has no known spread and cannot rank anything.
    """

    cls: str
    source: str
    points: dict[tuple[str, str, str, int, int], tuple[float, ...]]

    @property
    def providers(self) -> frozenset[str]:
        """Providers with at least two variants measured on this class (the only ones evidence can reorder)."""
        seen: dict[str, set[str]] = {}
        for provider, variant, *_ in self.points:
            seen.setdefault(provider, set()).add(variant)
        return frozenset(p for p, vs in seen.items() if len(vs) > 1)

    def winners(self, provider: str, variants: Iterable[str]) -> frozenset[str]:
        """Every variant (of `variants`) this evidence chooses at some measured (shape, rows) of `provider`."""
        names = sorted(set(variants))
        points = sorted({(s, r) for (p, _v, s, r, _t) in self.points if p == provider})
        found = {self.choose(provider, names, s, r).winner for s, r in points}
        return frozenset(w for w in found if w is not None)

    def choose(self, provider: str, variants: Iterable[str], shape: str | None, rows: int) -> VariantChoice:
        """The variant faster than every other one beyond noise at (shape, rows), or None with the reason.

        Beyond noise: at every thread count where each variant has MIN_RECORDS records, the winner's
        slowest record is faster than every other variant's fastest one (the ranges of repeated records
        do not overlap), and there is at least one such thread count.
        """
        names = sorted(set(variants))
        where = f"{self.source}: {shape} M={rows}"
        if shape is None:
            return VariantChoice(None, "no bench shape matches this op's dims")
        if len(names) < 2:
            return VariantChoice(None, "one eligible variant")
        by_threads: dict[int, dict[str, tuple[float, ...]]] = {}
        for (p, v, s, r, t), values in self.points.items():
            if p == provider and s == shape and r == rows and v in names:
                by_threads.setdefault(t, {})[v] = values
        usable = {t: got for t, got in by_threads.items()
                  if set(got) == set(names) and all(len(x) >= MIN_RECORDS for x in got.values())}
        if not usable:
            return VariantChoice(None, f"no evidence ({where}: each variant needs {MIN_RECORDS} records "
                                       f"at one thread count)")
        winners = set()
        for got in usable.values():
            best = min(names, key=lambda v: (max(got[v]), v))
            beats = all(max(got[best]) < min(got[v]) for v in names if v != best)
            winners.add(best if beats else None)
        ranges = "; ".join(f"t={t}: " + ", ".join(f"{v} {min(got[v]):.4g}-{max(got[v]):.4g} us" for v in names)
                           for t, got in sorted(usable.items()))
        if len(winners) == 1 and None not in winners:
            return VariantChoice(winners.pop(), f"evidence {where}: {ranges}")
        return VariantChoice(None, f"within noise ({where}: {ranges})")


def load_variant_evidence(cls: str, path: Path | str | None = None) -> VariantEvidence:
    """The class's evidence from `path` (default: its committed file; missing = no evidence)."""
    path = Path(path) if path is not None else class_evidence_path(cls)
    try:
        label = path.resolve().relative_to(CLASSES_DIR.parent.parent).as_posix()
    except ValueError:
        label = str(path)
    points: dict[tuple[str, str, str, int, int], list[float]] = {}
    for row in load_measurements(path):
        if row.cls != cls or row.metric != RANK_METRIC:
            continue
        points.setdefault((row.provider, row.variant, row.shape, row.rows, row.threads), []).append(row.value)
    return VariantEvidence(cls, label, {k: tuple(sorted(v)) for k, v in sorted(points.items())})


def bench_shape(interface: str, dims: dict[str, object], weight_dtype: str | None = None) -> str | None:
    """The label of the bench case (bench/shapes.json) whose dims all equal the op's, or None."""
    from kernelmap.bench.workload import bench_cases

    _entry, cases = bench_cases(interface)
    for case in cases:
        allowed = case.get("weight_dtypes")
        if allowed and weight_dtype not in allowed:
            continue
        if all(dims.get(k) == v for k, v in case["dims"].items()):
            return str(case["label"])
    return None
