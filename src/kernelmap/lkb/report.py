"""LKB stage, the `kernelmap lkb` report: everything the convergence metrics say about one (model, class).

Input: the class (default: the host's), an optional step profile (file, or measured through
`profile.measure` for a model), the measurements file, the classes/maps/campaigns folders. Output: a
JSON-ready dict plus its text lines. It only assembles; the rules live in metrics.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kernelmap.lkb import metrics, profile
from kernelmap.lkb.campaign import CAMPAIGNS_DIR
from kernelmap.lkb.coverage import MAPS_DIR, ProviderCheck, check_providers
from kernelmap.lkb.evidence import ROWS, bandwidth, envelope, load_measurements
from kernelmap.lkb.registry import CLASSES_DIR, DEVICES_PATH, LKB_DIR, Chain, Point, load_chain, load_devices

__all__ = ["FORKS_PATH", "build_report", "campaign_metrics", "render_forks", "report_lines"]

FORKS_PATH = LKB_DIR / "FORKS.md"


def build_report(cls: str | None = None, *, profile_path: Path | None = None, model: Path | None = None,
                 measurements: Path | None = None, classes_dir: Path = CLASSES_DIR, maps_dir: Path = MAPS_DIR,
                 campaigns_dir: Path = CAMPAIGNS_DIR, devices_path: Path = DEVICES_PATH,
                 rows: Sequence[int] = ROWS) -> dict[str, Any]:
    """The full report for class `cls` (host class when None)."""
    from kernelmap.target import host_class

    chain = load_chain(classes_dir)
    name = cls or host_class()
    chain.get(name)
    check = check_providers(chain, maps_dir)
    meas = load_measurements(measurements) if measurements is not None else []
    env = envelope(meas, check.assigned)
    steps: dict[int, list[profile.ProfileEntry]] = {}
    source = "none"
    if profile_path is not None:
        steps = profile.load_profile(profile_path)
        source = str(profile_path)
    elif model is not None:
        steps = {r: profile.measure(model, r) for r in rows}
        source = f"measured: {model}"
    gaps = []
    for r in rows:
        if r in steps:
            gaps.append(metrics.gap(steps[r], r, name, chain, check, env))
        else:
            gaps.append({"rows": r, "line": f"C{r}: no step profile (pass --profile FILE or -m MODEL)"})
    devices, cpu = _devices(load_devices(devices_path), name, host=cls is None)
    return {
        "class": name,
        "lineage": [c.name for c in chain.lineage(name)],
        "features": sorted(chain.features(name)),
        "profile": source,
        "measurements": str(measurements) if measurements is not None else None,
        "measurement_rows": len(meas),
        "gaps": gaps,
        "residual": metrics.residual(name, chain, check),
        "lines_per_class": metrics.lines_per_class(chain, check),
        "shapes": {f"{pv[0]}:{pv[1]}": {"how": sh.how, "why": sh.why, "source": sh.source}
                   for pv, sh in sorted(check.shapes.items())},
        "yield": metrics.parameterization_yield(campaigns_dir),
        "envelope": metrics.envelope_status(name, chain, env),
        "provider_check": {"ok": check.ok, "assigned": len(check.assigned), "variants": len(check.variants),
                           "findings": check.lines()},
        "devices": devices,
        "cpu_model": cpu,
        "bandwidth_gbps": {str(k): v for k, v in sorted(bandwidth(meas, name).items())},
    }


def _devices(records: list[dict[str, Any]], cls: str, *, host: bool) -> tuple[list[dict[str, Any]], str | None]:
    """The device records a report shows: the class's, and for the host only those naming this CPU.

    A class holds several SKUs (the build machine is an AMD EPYC one day and an Intel Xeon the next), so
    the host's report keeps the records whose `model_name` occurs in the CPU's own model name, and says so
    when none does, rather than printing another machine's facts as this one's.
    """
    from kernelmap.target import host_model_name

    of_class = [d for d in records if d["class"] == cls]
    if not host:
        return of_class, None
    cpu = host_model_name()
    return [d for d in of_class if d["model_name"].lower() in cpu.lower()], cpu


def campaign_metrics(report: dict[str, Any]) -> dict[str, Any]:
    """The ledger fields of a report: residual counts and the shared share of each profiled row count."""
    res = report["residual"]
    out: dict[str, Any] = {"residual_count": res["count"], "residual_loc": res["loc"],
                           "residual_copy_points": res["copy_points"],
                           "residual_single_class": res["single_class"]["count"],
                           "residual_single_class_loc": res["single_class"]["loc"]}
    for gap in report["gaps"]:
        key = f"coverage_c{gap['rows']}"
        if "percent" in gap:
            out[key] = gap["percent"]["shared"] + gap["percent"]["shared_unmeasured"]
            out[key + "_measured"] = gap["percent"]["shared"]
        else:
            out[key] = "unmeasured"
    return out


def report_lines(report: dict[str, Any]) -> list[str]:
    """The text form of a report."""
    lines = [f"class {report['class']} ({' <- '.join(report['lineage'])}); profile: {report['profile']}; "
             f"evidence rows: {report['measurement_rows']}"]
    lines += [g["line"] for g in report["gaps"]]
    res = report["residual"]
    single = res["single_class"]
    lines.append(f"LKB residual: {res['count']} entries, {res['loc']} lines ({res['copy_points']} copy points, "
                 f"{res['unregistered']} unregistered variants); single-class bucket: {single['count']} points, "
                 f"{single['loc']} lines; {len(res['instantiation_points'])} instantiation points (how measured "
                 "from the sources)")
    lines += _lines_report(report["lines_per_class"])
    y = report["yield"]
    lines.append(f"parameterization yield: {y['lines_deleted']} lines deleted, {len(y['promoted'])} promoted "
                 f"({y['campaigns']} campaigns)")
    inside = [e["family"] for e in report["envelope"] if e["status"] == "inside"]
    partial = [f"{e['family']} ({len(e['measured_points'])}/{e['points_on_class']} points"
               + (f"; all at C{',C'.join(str(r) for r in e['inside_rows'])}" if e["inside_rows"] else "") + ")"
               for e in report["envelope"] if e["status"] == "partial"]
    outside = [e["family"] for e in report["envelope"] if e["status"] == "outside"]
    lines.append("inside their evidence envelope: " + (", ".join(inside) or "none"))
    if partial:
        lines.append("partly inside: " + ", ".join(partial))
    lines.append("outside (no record on this class): " + (", ".join(outside) or "none"))
    pc = report["provider_check"]
    lines.append(f"providers: {pc['assigned']} of {pc['variants']} variants in a family point"
                 + ("" if pc["ok"] else " (registry problems below)"))
    lines += ["  " + f for f in pc["findings"]]
    if report.get("cpu_model") and not report["devices"]:
        lines.append(f"device: no DEVICES.toml entry names this CPU ({report['cpu_model']!r}, class "
                     f"{report['class']}); add one with its cores and caches")
    for d in report["devices"]:
        bw = report["bandwidth_gbps"]
        lines.append(f"device {d['id']}: {d['model_name']}, {d['cores']} cores; bandwidth "
                     + (", ".join(f"{v:.1f} GB/s at {k} threads" for k, v in bw.items()) if bw
                        else "not measured (run `kernelmap bench`)"))
    return lines


def _files(part: dict[str, Any]) -> str:
    n = len(part["files"])
    return f"{n} file" + ("" if n == 1 else "s")


def _lines_report(rows: list[dict[str, Any]]) -> list[str]:
    """One line per class that runs SIMD code: lanes + instantiation (+ copy) lines, and what it added."""
    out = ["lines of C per class (lanes headers + instantiations + copies; added = what no ancestor runs):"]
    for row in rows:
        own, add = row["lines"], row["added"]
        if not (own["lanes"]["lines"] or own["instantiations"]["lines"] or own["copies"]["lines"]):
            continue
        out.append(f"  {row['class']}: lanes {own['lanes']['lines']} ({_files(own['lanes'])}), "
                   f"instantiations {own['instantiations']['lines']} ({_files(own['instantiations'])}), "
                   f"copies {own['copies']['lines']} ({_files(own['copies'])}); added by the class: "
                   f"{row['added_total']} lines (lanes {add['lanes']['lines']}, instantiations "
                   f"{add['instantiations']['lines']}, copies {add['copies']['lines']})")
    return out


def render_forks(chain: Chain, check: ProviderCheck) -> str:
    """FORKS.md: every copy point (the LKB residual) with its reason, the single-class bucket, unregistered variants."""
    from kernelmap.lkb.coverage import point_requires

    seen: dict[str, tuple[str, Point]] = {}
    for _cls, fam, point in chain.all_points():
        seen.setdefault(point.id, (fam.id, point))
    copies, single = [], []
    for pid in sorted(seen):
        fam_id, point = seen[pid]
        only = chain.classes_having(point_requires(point, check.variants))
        sources = ", ".join(sorted({check.variants[pv].source for pv in point.providers if pv in check.variants}))
        row = (f"| {pid} | {fam_id} | {', '.join(point.classes)} | {sources} | {point.reason or '-'} | "
               f"{point.evidence or '-'} |")
        if check.how.get(pid) != "copy":
            continue
        if len(only) == 1:
            single.append(row)
        else:
            copies.append(row)
    head = "| point | family | classes | sources | reason | evidence |\n| --- | --- | --- | --- | --- | --- |"
    parts = ["# LKB residual: forks",
             "Generated by `kernelmap lkb check --write-forks` from the class files and kernel maps; do not edit "
             "by hand (a test compares it). See docs/LKB.md.",
             f"## Copy points ({len(copies)})", head + ("\n" + "\n".join(copies) if copies else ""),
             f"## Single-class bucket ({len(single)})",
             "Points on features only one class has; counted apart from the residual.",
             head + ("\n" + "\n".join(single) if single else ""),
             f"## Unregistered variants ({len(check.residual)})",
             "\n".join(f"- {p}:{v} ({check.variants[(p, v)].source})" for p, v in check.residual) or "none"]
    return "\n\n".join(parts) + "\n"
