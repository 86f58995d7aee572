"""LKB stage, promotion check: may a pattern shared by several family points become a family parameter?

Input: point ids, the resolved chain, the provider assignment, a measurements file. Output: a
`PromotionReport` with three verdicts (two users; byte-identical outputs at every existing point, run
through ctypes on random inputs for every variant this host can run; no microbench regression beyond
the noise band read from the measurements) and the overall decision. Anything not shown passes
nothing: an unrunnable variant or a missing record blocks promotion. It does not edit any file.
"""

from __future__ import annotations

import ctypes
import hashlib
import statistics
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from kernelmap.errors import LKBError, closest
from kernelmap.lkb.coverage import MAPS_DIR
from kernelmap.lkb.evidence import Measurement
from kernelmap.lkb.registry import Chain, Family, Point

__all__ = ["DEFAULT_NOISE", "PromotionReport", "legal_activations", "noise_band", "promote_check", "run_variants"]

DEFAULT_NOISE = 0.05
_HIGHER_BETTER = ("gbps", "gops")
_CHECK_ROWS = (1, 16)
_DIM_CAP = 4096


@dataclass
class PromotionReport:
    """The three checks of the promotion rule; `promote` only when all three pass."""

    points: list[str]
    family: str
    users: list[str] = field(default_factory=list)
    checks: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def promote(self) -> bool:
        return bool(self.checks) and all(c["verdict"] == "pass" for c in self.checks.values())

    def lines(self) -> list[str]:
        out = [f"points: {', '.join(self.points)} (family {self.family})"]
        for name, c in self.checks.items():
            out.append(f"{name}: {c['verdict']} - {c['detail']}")
        out.append("decision: " + ("promote" if self.promote else "refuse"))
        return out


def _find_points(chain: Chain, ids: Sequence[str]) -> tuple[Family, list[Point]]:
    found: dict[str, tuple[Family, Point]] = {}
    for _cls, fam, point in chain.all_points():
        found.setdefault(point.id, (fam, point))
    fams: dict[str, Family] = {}
    points = []
    for pid in ids:
        if pid not in found:
            near = closest(pid, list(found))
            raise LKBError("unknown family point" + (f" (closest: {near})" if near else ""), pointer="POINTS",
                           value=pid, hint="`kernelmap lkb --json` lists the points of each family")
        fam, point = found[pid]
        fams[fam.id] = fam
        points.append(point)
    if len(fams) != 1:
        raise LKBError("points of one promotion must belong to one family", pointer="POINTS",
                       value=sorted(fams), hint="promote within a family; a new family is a new generator")
    return next(iter(fams.values())), points


def noise_band(rows: Sequence[Measurement]) -> tuple[float, str]:
    """Relative noise: the median spread (max-min)/median of repeated records of one key, else the default."""
    groups: dict[tuple, list[float]] = {}
    for r in rows:
        groups.setdefault((r.cls, r.provider, r.variant, r.rows, r.threads, r.shape, r.metric, r.machine),
                          []).append(r.value)
    spreads = [(max(v) - min(v)) / statistics.median(v) for v in groups.values()
               if len(v) > 1 and statistics.median(v) > 0]
    if not spreads:
        return DEFAULT_NOISE, f"default {DEFAULT_NOISE:.0%} (no repeated records to read a spread from)"
    band = max(statistics.median(spreads), 0.01)
    return band, f"{band:.1%} (median spread of {len(spreads)} repeated record keys)"


def _regression(points: list[Point], rows: Sequence[Measurement], band: float) -> dict[str, Any]:
    """Compare the candidate (first point) with every other point on records sharing every key but the variant."""
    owner = {pv: p.id for p in points for pv in p.providers}
    keyed: dict[tuple, dict[str, float]] = {}
    for r in rows:
        pid = owner.get((r.provider, r.variant))
        if pid is None or not (r.metric.startswith(_HIGHER_BETTER) or r.metric in ("ns", "median_us")):
            continue
        key = (r.cls, r.provider, r.rows, r.threads, r.shape, r.metric)
        slot = keyed.setdefault(key, {})
        slot[pid] = max(slot.get(pid, r.value), r.value) if r.metric.startswith(_HIGHER_BETTER) else \
            min(slot.get(pid, r.value), r.value)
    cand = points[0].id
    compared, worst = 0, []
    for key, vals in sorted(keyed.items()):
        if cand not in vals:
            continue
        for pid, value in vals.items():
            if pid == cand or value <= 0:
                continue
            compared += 1
            higher = key[5].startswith(_HIGHER_BETTER)
            loss = (value - vals[cand]) / value if higher else (vals[cand] - value) / value
            if loss > band:
                worst.append(f"{cand} vs {pid} on {key[0]} C{key[2]} t{key[3]} {key[4]} {key[5]}: {loss:.1%} worse")
    if compared == 0:
        return {"verdict": "blocked", "detail": f"no records compare {cand} with the other points on one class"}
    if worst:
        return {"verdict": "fail", "detail": f"{len(worst)} of {compared} comparisons regress beyond the "
                f"{band:.1%} band; first: {worst[0]}"}
    return {"verdict": "pass", "detail": f"{compared} comparisons within the {band:.1%} noise band"}


def _capped_case(case: dict[str, Any]) -> dict[str, Any]:
    dims = {k: (min(int(v), _DIM_CAP) if isinstance(v, int) else v) for k, v in case.get("dims", {}).items()}
    return {**case, "dims": dims}


def legal_activations(raw: dict[str, Any], work: Any) -> None:
    """Make random q8_0/q8_k activation rows what the quantizers write: quants in [-127, 127], true bsums."""
    for port in raw.get("inputs", []) or []:
        buf = work.buffers.get(port["name"])
        if buf is None or port.get("dtype") not in ("q8_0", "q8_k"):
            continue
        size, first, count = (34, 2, 32) if port["dtype"] == "q8_0" else (292, 4, 256)
        blocks = buf.reshape(-1, size)
        qs = blocks[:, first:first + count].view(np.int8)
        qs[qs == -128] = -127
        if port["dtype"] == "q8_k":
            sums = qs.astype(np.int16).reshape(-1, 16, 16).sum(axis=2, dtype=np.int16)
            blocks[:, 260:292] = sums.astype("<i2").view(np.uint8).reshape(-1, 32)


def run_variants(provider: str, variants: Sequence[str], rows: int, *, maps_dir: Path = MAPS_DIR,
                 seed: int = 7) -> dict[str, bytes]:
    """Run each variant once (1 thread) on the same random inputs at `rows` rows; return its output bytes.

    Inputs come from the bench workload of the provider's interface (its first shape that fits the map,
    dims capped at 4096). Outputs are every port the kernel writes (write or read_write access), concatenated by name.
    """
    from kernelmap.bench.providers import load_providers
    from kernelmap.bench.runner import _slots, trampoline_source
    from kernelmap.bench.workload import bench_cases, make_workload, ports
    from kernelmap.build.driver import KERNEL_ROOT, CompileUnit, build_shared

    table = {p.id: p for p in load_providers()} if maps_dir == MAPS_DIR else \
        {p.id: p for p in load_providers((maps_dir,))}
    if provider not in table:
        raise LKBError("no kernel map for provider", pointer="providers", value=provider)
    prov = table[provider]
    chosen = [v for v in prov.variants if v.name in variants]
    entry, cases = bench_cases(prov.interface)
    if not cases:
        raise LKBError("no bench shape for this interface, so no inputs to compare on",
                       pointer=prov.interface, value=provider)
    work0, case = "no case", None
    for raw_case in cases:
        case = _capped_case(raw_case)
        work0 = make_workload(prov.raw, entry, case, rows, seed=seed)
        if not isinstance(work0, str):
            break
    if isinstance(work0, str) or case is None:
        raise LKBError(f"no bench shape fits the map's constraints ({work0})", pointer=prov.interface,
                       value=provider)
    text = trampoline_source(prov.raw, chosen)
    digest = hashlib.sha256(text.encode()).hexdigest()[:12]
    with tempfile.TemporaryDirectory(prefix="km-lkb-") as tmp:
        tramp = Path(tmp) / f"lkb_{provider}_{digest}.c"
        tramp.write_text(text)
        sources = {v.source: v.cflags for v in chosen}
        units = [CompileUnit(KERNEL_ROOT / s, f) for s, f in sorted(sources.items())] + [CompileUnit(tramp)]
        lib = ctypes.CDLL(str(build_shared(units, name=f"lkb_promote_{provider}")))
    written = [n for n, p in sorted(ports(prov.raw).items()) if p.get("access") in ("write", "read_write")]
    out = {}
    for i, var in enumerate(chosen):
        work = make_workload(prov.raw, entry, case, rows, seed=seed)
        assert not isinstance(work, str)
        legal_activations(prov.raw, work)
        slots = _slots(prov.raw, work)
        fn = getattr(lib, f"km_bench_t{i}")
        fn.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int]
        fn.restype = None
        fn(slots.ctypes.data, 0, 1)
        out[var.name] = b"".join(np.ascontiguousarray(work.buffers[n]).tobytes() for n in written)
    return out


def _identical(points: list[Point], features: frozenset[str], maps_dir: Path) -> dict[str, Any]:
    from kernelmap.lkb.coverage import read_maps

    declared = read_maps(maps_dir)
    by_provider: dict[str, list[str]] = {}
    for p in points:
        for prov, var in p.providers:
            by_provider.setdefault(prov, []).append(var)
    compared, blocked, differ = 0, [], []
    for prov, names in sorted(by_provider.items()):
        if len(names) < 2:
            continue
        for name in names:
            mv = declared.get((prov, name))
            if mv is None:
                blocked.append(f"{prov}:{name} has no kernel map")
            elif not mv.requires <= features:
                blocked.append(f"{prov}:{name} needs {', '.join(sorted(mv.requires - features))}")
        if blocked:
            continue
        for rows in _CHECK_ROWS:
            outs = run_variants(prov, names, rows, maps_dir=maps_dir)
            base = names[0]
            for name in names[1:]:
                compared += 1
                if outs[name] != outs[base]:
                    differ.append(f"{prov}:{name} differs from {prov}:{base} at C{rows}")
    if blocked:
        return {"verdict": "blocked", "detail": "cannot run on this host: " + "; ".join(blocked)}
    if differ:
        return {"verdict": "fail", "detail": "; ".join(differ)}
    if compared == 0:
        return {"verdict": "blocked", "detail": "no provider has two of these points to compare"}
    return {"verdict": "pass", "detail": f"{compared} output comparisons byte-identical"}


def promote_check(chain: Chain, point_ids: Sequence[str], measurements: Sequence[Measurement], *,
                  features: frozenset[str], maps_dir: Path = MAPS_DIR, noise: float | None = None,
                  run: bool = True) -> PromotionReport:
    """Apply the promotion rule to `point_ids` (the first is the candidate form for the regression check)."""
    fam, points = _find_points(chain, point_ids)
    report = PromotionReport([p.id for p in points], fam.id)
    report.users = sorted({c for p in points for c in p.classes})
    if len(points) >= 2 and len(report.users) >= 2:
        report.checks["users"] = {"verdict": "pass", "detail": f"{len(points)} points on classes "
                                  + ", ".join(report.users)}
    else:
        report.checks["users"] = {"verdict": "fail", "detail": "one user is a specialization; a parameter needs "
                                  f"two points on two classes (found {len(points)} on {len(report.users)})"}
    numerics = {p.id: fam.numerics(p) for p in points}
    if len({repr(sorted(v.items())) for v in numerics.values()}) > 1:
        report.checks["byte_identical"] = {"verdict": "fail", "detail": "the points declare different numerics "
                                           "points, so their bits differ by construction"}
    elif run:
        report.checks["byte_identical"] = _identical(points, features, maps_dir)
    else:
        report.checks["byte_identical"] = {"verdict": "blocked", "detail": "not run (--no-run)"}
    band, how = (noise, f"{noise:.1%} (given)") if noise is not None else noise_band(measurements)
    reg = _regression(points, measurements, band)
    reg["noise_band"] = how
    report.checks["no_regression"] = reg
    return report
