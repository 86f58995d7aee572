"""LKB stage, campaign ledger: one TOML file per hardware or model campaign, with metrics at start and exit.

Input: a campaign name, the class, the metrics of `kernelmap lkb` now, TTBP/TTPV hours. Output:
`lkb/campaigns/<name>.toml` with [campaign], [start] and, at exit, [exit] holding the two exit lines
("Promoted into the LKB: ..." and "LKB residual delta: ..."). Files are written atomically; an exit
never rewrites [start]. It does not compute the metrics (metrics.py does).
"""

from __future__ import annotations

import datetime as _dt
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kernelmap.errors import LKBError
from kernelmap.lkb import schemas
from kernelmap.lkb._io import read_toml, render_toml, write_text_atomic

__all__ = ["CAMPAIGNS_DIR", "exit_campaign", "load_ledgers", "residual_delta_line", "start_campaign"]

CAMPAIGNS_DIR = Path(__file__).resolve().parent / "campaigns"
_NAME = re.compile(r"^[a-z0-9_]+$")


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()


def _path(name: str, folder: Path) -> Path:
    if not _NAME.match(name):
        raise LKBError("campaign name must match [a-z0-9_]+", pointer="NAME", value=name)
    return Path(folder) / f"{name}.toml"


def _hours(value: float | None) -> float | str:
    return "unmeasured" if value is None else float(value)


def start_campaign(name: str, cls: str, metrics: dict[str, Any], *, model: str = "",
                   ttbp: float | None = None, ttpv_speed: float | None = None, ttpv_energy: float | None = None,
                   folder: Path = CAMPAIGNS_DIR) -> Path:
    """Write a new ledger with the start metrics; refuse if the campaign already exists."""
    path = _path(name, folder)
    if path.exists():
        raise LKBError("campaign already started", path=path, pointer="/campaign/name", value=name,
                       hint=f"run `kernelmap lkb campaign exit {name}` or pick another name")
    ledger = {"campaign": {"name": name, "class": cls, "model": model, "started": _now()},
              "start": {**metrics, "ttbp_hours": _hours(ttbp), "ttpv_speed_hours": _hours(ttpv_speed),
                        "ttpv_energy_hours": _hours(ttpv_energy)}}
    write_text_atomic(path, render_toml(ledger))
    return path


def residual_delta_line(start: dict[str, Any], end: dict[str, Any]) -> str:
    """'LKB residual delta: <count>, <lines> -> <count>, <lines> (<+/-n>)'."""
    b_count, b_loc = int(start["residual_count"]), int(start["residual_loc"])
    a_count, a_loc = int(end["residual_count"]), int(end["residual_loc"])
    return (f"LKB residual delta: {b_count} entries, {b_loc} lines -> {a_count} entries, {a_loc} lines "
            f"({a_count - b_count:+d})")


def exit_campaign(name: str, metrics: dict[str, Any], promoted: Sequence[str], *,
                  ttbp: float | None = None, ttpv_speed: float | None = None, ttpv_energy: float | None = None,
                  parity: bool = False, folder: Path = CAMPAIGNS_DIR) -> tuple[Path, list[str]]:
    """Add the [exit] table with the exit metrics and the two exit lines; return the path and the lines.

    `parity=True` (bit parity holds at this exit) with no typed `ttbp` records TTBP from the ledger itself:
    the hours from `started` to this exit.
    """
    path = _path(name, folder)
    if not path.exists():
        raise LKBError("no such campaign", path=path, pointer="/campaign/name", value=name,
                       hint=f"start it with `kernelmap lkb campaign start {name}`")
    ledger = read_toml(path, schemas.CAMPAIGN)
    if "exit" in ledger:
        raise LKBError("campaign already exited", path=path, pointer="/exit", value=name)
    promoted_line = "Promoted into the LKB: " + (", ".join(promoted) if promoted else "none")
    delta_line = residual_delta_line(ledger["start"], metrics)
    exited = _now()
    ledger["campaign"]["exited"] = exited
    source = "typed"
    if ttbp is None and parity:  # measured from the ledger: started -> this exit, at which parity holds
        started = _dt.datetime.fromisoformat(str(ledger["campaign"]["started"]))
        ttbp = round((_dt.datetime.fromisoformat(exited) - started).total_seconds() / 3600.0, 3)
        source = "ledger: started -> exited"
    ledger["exit"] = {**metrics, "ttbp_hours": _hours(ttbp), "ttpv_speed_hours": _hours(ttpv_speed),
                      "ttpv_energy_hours": _hours(ttpv_energy), "promoted": list(promoted),
                      "promoted_line": promoted_line, "residual_delta_line": delta_line}
    if ttbp is not None:
        ledger["exit"]["ttbp_source"] = source
    write_text_atomic(path, render_toml(ledger))
    return path, [promoted_line, delta_line]


def load_ledgers(folder: Path = CAMPAIGNS_DIR) -> list[dict[str, Any]]:
    """Every ledger in `folder`, sorted by file name (schema-checked)."""
    return [read_toml(p, schemas.CAMPAIGN) for p in sorted(Path(folder).glob("*.toml"))]
