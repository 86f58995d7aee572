"""Bench stage, output: append bench results to a measurements TOML file the LKB reads.

Input: a `BenchReport`, the host class, machine name and date. Output: `[[measurement]]` tables
(class, provider, variant, rows, threads, shape, metric, value, machine, date) appended atomically
(the old file plus the new rows are written to a temporary name, then renamed). It does not read or
validate earlier rows.
"""

from __future__ import annotations

import datetime as _dt
import os
import platform
import tempfile
from pathlib import Path

from kernelmap.bench.runner import BenchReport
from kernelmap.errors import BuildError

__all__ = ["MEASUREMENTS_ENV", "default_measurements_path", "machine_name", "measurement_rows",
           "write_measurements"]

MEASUREMENTS_ENV = "KERNELMAP_MEASUREMENTS"


def default_measurements_path() -> Path:
    """$KERNELMAP_MEASUREMENTS or ./measurements.toml."""
    return Path(os.environ.get(MEASUREMENTS_ENV) or "measurements.toml")


def machine_name() -> str:
    """The CPU model name (/proc/cpuinfo `model name`), else the platform's processor string."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                key, sep, value = line.partition(":")
                if sep and key.strip() in ("model name", "Model", "Hardware"):
                    return value.strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def _toml_str(text: str) -> str:
    out = []
    for ch in text:
        if ch in ('"', "\\"):
            out.append("\\" + ch)
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _toml_float(value: float) -> str:
    text = repr(float(value))
    if text in ("nan", "inf", "-inf"):
        return text
    return text if ("." in text or "e" in text) else text + ".0"


def measurement_rows(report: BenchReport, cls: str, machine: str, date: str,
                     suffix: str = "") -> list[dict[str, object]]:
    """One row per (result, metric): gbps always, gops when the shape declares operations, median_us.

    `suffix` marks non-default conditions in the metric name (e.g. "_hot" for cache-resident weights).
    """
    rows: list[dict[str, object]] = []
    for r in report.results:
        metrics = [("gbps", r.gbps)]
        if r.gops is not None:
            metrics.append(("gops", r.gops))
        metrics.append(("median_us", r.median_s * 1e6))
        for metric, value in metrics:
            rows.append({"class": cls, "provider": r.provider, "variant": r.variant, "rows": r.rows,
                         "threads": r.threads, "shape": r.shape, "metric": metric + suffix, "value": float(value),
                         "machine": machine, "date": date})
    for nth, gbps in sorted(report.bandwidth.items()):
        rows.append({"class": cls, "provider": "stream_read", "variant": "bench", "rows": 0, "threads": nth,
                     "shape": "bandwidth", "metric": "gbps", "value": float(gbps), "machine": machine,
                     "date": date})
    return rows


def _render(rows: list[dict[str, object]]) -> str:
    parts = []
    for row in rows:
        lines = ["[[measurement]]"]
        for key, value in row.items():
            if isinstance(value, bool):
                text = "true" if value else "false"
            elif isinstance(value, int):
                text = str(value)
            elif isinstance(value, float):
                text = _toml_float(value)
            else:
                text = _toml_str(str(value))
            lines.append(f"{key} = {text}")
        parts.append("\n".join(lines) + "\n")
    return "\n".join(parts)


def write_measurements(report: BenchReport, path: Path, *, cls: str, machine: str | None = None,
                       date: str | None = None, suffix: str = "") -> int:
    """Append the report's rows to `path` atomically; return the number of rows written."""
    rows = measurement_rows(report, cls, machine or machine_name(),
                            date or _dt.datetime.now(_dt.timezone.utc).date().isoformat(), suffix)
    if not rows:
        return 0
    path = Path(path)
    try:
        old = path.read_text(encoding="utf-8") if path.exists() else ""
        text = old + ("\n" if old and not old.endswith("\n\n") else "") + _render(rows)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(text)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError as exc:
        raise BuildError(f"cannot write the measurements file: {exc}", path=path,
                         hint="pass --out FILE or set KERNELMAP_MEASUREMENTS") from exc
    return len(rows)
