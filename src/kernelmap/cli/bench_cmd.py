"""CLI: `kernelmap bench` times every provider variant this CPU can run at the default model's shapes.

Input: flags (filters, rows, threads, output file). Output: a table (or `--json`) on stdout, rows
appended to the measurements TOML file, skips and build errors on stderr. The timing itself lives in
kernelmap.bench; this module only parses flags and renders.
"""

from __future__ import annotations

import fnmatch
import json
import sys
from pathlib import Path

import click

from kernelmap.errors import BuildError, RequestError, closest

__all__ = ["register"]


def _int_list(text: str, flag: str) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError:
        values = ()
    if not values or any(v < 1 for v in values):
        raise RequestError("expected a comma list of positive integers", pointer=flag, value=text,
                           hint=f"e.g. {flag} 1,16,128")
    return values


def _select(providers, patterns: tuple[str, ...]):
    if not patterns:
        return list(providers)
    wanted = [p.strip() for pat in patterns for p in pat.split(",") if p.strip()]
    ids = [p.id for p in providers]
    chosen = [p for p in providers if any(fnmatch.fnmatchcase(p.id, w) for w in wanted)]
    for w in wanted:
        if not any(fnmatch.fnmatchcase(i, w) for i in ids):
            near = closest(w, ids)
            raise RequestError(f"no provider matches {w!r}" + (f" (closest: {near})" if near else ""),
                               pointer="--filter", value=w, hint="`kernelmap bench --filter 'linear_*'`")
    return chosen


def _fmt(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


@click.command("bench")
@click.option("--filter", "filters", multiple=True, metavar="ID",
              help="Provider ids or globs (comma list, repeatable), e.g. linear_q8_0_q8_0 or 'rmsnorm*'.")
@click.option("--variant", "variants", default="", metavar="NAMES", help="Only these variants, e.g. ref,avx2.")
@click.option("--rows", default=None, help="Row counts (tokens per call) [default: 1,16,128; --gemv: 1; --prefill: 128].")
@click.option("--threads", default=None, help="Thread counts [default: 1,2; --gemv, --prefill: 2].")
@click.option("--shape", "shape", default="", metavar="LABELS",
              help="Only these bench shapes (comma list of labels), e.g. 262144x640.")
@click.option("--gemv", is_flag=True,
              help="Decode GEMV per weight type: the linear providers' resolver-picked variant, 1 row, 2 threads, "
                   "at the LM-head and FFN shapes, with each point's share of the read bandwidth: '% bw' of the "
                   "fastest pass of the streaming read (a ceiling) and '% typ' of its median pass (a typical pass, "
                   "like for like with the point's median call; on a shared VM the two can differ by a quarter), and "
                   "'% adj' of the median passes of the reads run right before and after the point (the machine "
                   "at that moment: its bandwidth moves within minutes). Every read is the best of a plain and "
                   "two software-prefetched streaming loops over 2 MiB pages, as a model's weights are.")
@click.option("--prefill", is_flag=True,
              help="Prefill GEMM per weight type: the int8 linear providers' resolver-picked variant, 128 rows, "
                   "2 threads, at the FFN shapes, with GMAC/s (M*N*K multiply-adds per second) and the share of the "
                   "variant's int8 peak. The peak is measured in the same run, not computed from a clock: every "
                   "thread runs 12 independent chains of the instruction the variant's integer dots are built on "
                   "(avx512vnni: vpdpbusd zmm, avx512: vpmaddubsw zmm, 64 int8 products each; avx2: vpmaddubsw "
                   "ymm, 32) for a fixed count, peak = products / fastest wall time (x86 only; elsewhere '-'). "
                   "For the 32-element formats (q4_0, q4_1, q5_0, q5_1, q8_0) also the share of the instruction's "
                   "lane step: independent steps of the whole sequence their contracts need per dot (the dot into "
                   "an exact int32, the f32 conversion, the block's fma), the fastest any blocking of those "
                   "contracts can run (the K-quants' float steps are per sub-block or superblock: no such floor).")
@click.option("--min-time", default=0.1, show_default=True, type=float, help="Seconds of timed calls per point.")
@click.option("--bandwidth-mib", default=512, show_default=True, type=int,
              help="Buffer size of the streaming-read bandwidth measurement (0 = skip it); measured 3 times before "
                   "the kernels and 3 times after, shares are of the median (of each measurement's fastest pass; "
                   "--gemv also of its median pass).")
@click.option("--out", "out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Measurements file to append to [default: $KERNELMAP_MEASUREMENTS or ./measurements.toml].")
@click.option("--no-record", is_flag=True, help="Do not append to the measurements file.")
@click.option("--hot", is_flag=True,
              help="Reuse one weight copy (cache-resident); recorded metrics get a _hot suffix.")
@click.option("--peer", "peer", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="llama-cpp-python's interpreter: also time llama.cpp's MUL_MAT at each linear point.")
@click.option("--policy", "policy_name", default=None, metavar="NAME",
              help="Numerics policy whose linear contracts the --gemv summary marks (name or file) [default: "
                   "the compiler's, llama-cpu; an AVX2-only CPU runs llama-cpu-avx2 for llama.cpp's AVX2 bits].")
@click.option("--json", "as_json", is_flag=True, help="Print results as JSON.")
def bench(filters: tuple[str, ...], variants: str, rows: str | None, threads: str | None, shape: str, gemv: bool,
          prefill: bool, min_time: float, bandwidth_mib: int, out: Path | None, no_record: bool, hot: bool, peer: Path | None,
          policy_name: str | None, as_json: bool) -> None:
    """Time kernel variants at real shapes, with GB/s, GOP/s and the share of measured bandwidth.

    Example: kernelmap bench --filter linear_q8_0_q8_0 --rows 1,16 --threads 1,2 --peer .venv-peer/bin/python;
    kernelmap bench --gemv (decode GEMV of every weight type against the read bandwidth);
    kernelmap bench --prefill (128-row GEMM of every int8 weight type against the measured int8 peak);
    kernelmap bench --gemv --policy llama-cpu-avx2 (the points an AVX2 build with that policy runs).
    """
    from rich.console import Console

    from kernelmap.bench import default_measurements_path, load_providers, measure_bandwidth, run_bench
    from kernelmap.bench.record import machine_name, write_measurements
    from kernelmap.bench.runner import (
        GEMV_INTERFACE,
        BenchReport,
        StreamProbe,
        gemv_summary,
        prefill_summary,
        rebase_bandwidth,
        resolver_variants,
    )
    from kernelmap.bench.workload import bench_cases
    from kernelmap.compiler import CompileOptions
    from kernelmap.numerics import load_policy
    from kernelmap.target import host_class, target_features

    default_policy = load_policy(policy_name or CompileOptions().policy)  # a bad --policy fails before the timing
    if gemv and prefill:
        raise RequestError("--gemv and --prefill are separate runs", pointer="--prefill",
                           hint="run `kernelmap bench --gemv` and `kernelmap bench --prefill` one after the other")
    row_list = _int_list(rows or ("1" if gemv else "128" if prefill else "1,16,128"), "--rows")
    thread_list = _int_list(threads or ("2" if gemv or prefill else "1,2"), "--threads")
    if min_time <= 0 or min_time > 60:
        raise RequestError("--min-time must be in (0, 60] seconds", pointer="--min-time", value=min_time)
    providers = _select(load_providers(), filters)
    shapes = [s.strip() for s in shape.split(",") if s.strip()] or None
    if gemv:
        providers = [p for p in providers if p.interface == GEMV_INTERFACE]
        shapes = shapes or list(bench_cases(GEMV_INTERFACE)[0].get("gemv_shapes", ()))
    if prefill:
        providers = [p for p in providers
                     if p.interface == GEMV_INTERFACE and str(p.raw.get("quant", {}).get("weight", "")).startswith("q")]
        shapes = shapes or list(bench_cases(GEMV_INTERFACE)[0].get("prefill_shapes", ()))
    wanted_variants = {v.strip() for v in variants.split(",") if v.strip()}
    if wanted_variants:
        from dataclasses import replace

        providers = [replace(p, variants=tuple(v for v in p.variants if v.name in wanted_variants))
                     for p in providers]
    elif gemv or prefill:
        providers = resolver_variants(providers, target_features())
    err = Console(stderr=True)
    samples: dict[int, list[float]] = {}
    typical: dict[int, list[float]] = {}
    with err.status("measuring read bandwidth...") as status:
        # 3 measurements before the kernels and 3 after; every share is of their median (the VM drifts)
        bandwidth = (measure_bandwidth(thread_list, bandwidth_mib << 20, repeats=3, samples=samples, typical=typical)
                     if bandwidth_mib > 0 else {})
        # --gemv: each point bracketed by the streaming read (% adj: of what the machine streamed just then)
        adjacent = StreamProbe(bandwidth_mib << 20) if gemv and bandwidth_mib > 0 else None
        report: BenchReport = run_bench(providers, rows=row_list, threads=thread_list, min_time=min_time,
                                        bandwidth=bandwidth, cold=not hot, shapes=shapes,
                                        progress=lambda text: status.update(text), adjacent=adjacent)
        if bandwidth_mib > 0:
            status.update("measuring read bandwidth again...")
            measure_bandwidth(thread_list, bandwidth_mib << 20, repeats=3, samples=samples, typical=typical)
            rebase_bandwidth(report, samples, typical)
    peer_times: dict = {}
    if peer is not None:
        from kernelmap.bench.peer import peer_linear_times

        with err.status("timing llama.cpp's MUL_MAT at the linear points..."):
            peer_times = peer_linear_times(providers, report, peer, min_time, cold=not hot)
    gemv_rows = gemv_summary(report, providers, default_policy)
    prefill_rows = prefill_summary(report, providers, rows=max(row_list)) if max(row_list) > 1 else []
    cls = host_class()
    machine = machine_name()
    written = 0
    path = out or default_measurements_path()
    if not no_record:
        written = write_measurements(report, path, cls=cls, machine=machine, suffix="_hot" if hot else "")
    if as_json:
        doc = {"class": cls, "machine": machine,
               "bandwidth_gbps": {str(k): v for k, v in sorted(report.bandwidth.items())},
               "bandwidth_samples_gbps": {str(k): v for k, v in sorted(report.bandwidth_samples.items())},
               "bandwidth_typical_gbps": {str(k): v for k, v in sorted(report.bandwidth_typical.items())},
               "bandwidth_typical_samples_gbps": {str(k): v for k, v in sorted(report.bandwidth_typical_samples.items())},
               "int8_peak_gmacs": {f"{instr}|{nth}": v for (instr, nth), v in sorted(report.int8_peak.items())},
               "lane_step_gmacs": {f"{instr}|{nth}": v for (instr, nth), v in sorted(report.lane_peak.items())},
               "results": [dict(vars(r), llama_cpp_s=peer_times.get((r.provider, r.shape, r.rows, r.threads)))
                           for r in report.results], "gemv": gemv_rows, "prefill": prefill_rows, "skipped": report.skipped,
               "errors": report.errors, "measurements": {"path": str(path), "rows": written}}
        click.echo(json.dumps(doc, indent=1, sort_keys=True))
    else:
        _render(report, cls, machine, peer_times)
        if gemv_rows:
            _render_gemv(gemv_rows, default_policy.name, report.bandwidth_typical)
        if prefill_rows:
            _render_prefill(prefill_rows)
        if written:
            err.print(f"appended {written} rows to {path}")
    if report.skipped:
        err.print(f"{len(report.skipped)} points skipped (see --json for reasons)")
    if report.errors:
        for e in report.errors:
            print(f"error: {e['provider']}: {e['error']}", file=sys.stderr)
        raise BuildError(f"{len(report.errors)} provider(s) could not be built for the bench",
                         value=sorted(e["provider"] for e in report.errors))


def _render(report, cls: str, machine: str, peer_times: dict | None = None) -> None:
    from rich.console import Console
    from rich.table import Table

    def _bw(k: int, v: float) -> str:
        got = report.bandwidth_samples.get(k, [])
        spread = f" (median of {len(got)}: {min(got):.1f}-{max(got):.1f})" if len(got) > 1 else ""
        return f"{k} thread{'s' if k > 1 else ''}: {v:.1f} GB/s{spread}"

    bw = ", ".join(_bw(k, v) for k, v in sorted(report.bandwidth.items()))
    table = Table(title=f"kernelmap bench on {machine} ({cls}); read bandwidth {bw or 'not measured'}")
    cols = ["provider", "variant", "shape", "rows", "threads", "median us", "GB/s", "GOP/s", "% bw"]
    if peer_times:
        cols += ["llama.cpp us", "speedup"]
    for col in cols:
        table.add_column(col, justify="right" if col not in ("provider", "variant", "shape") else "left")
    for r in report.results:
        us = r.median_s * 1e6
        row = [r.provider, r.variant, r.shape, str(r.rows), str(r.threads), _fmt(us, 2 if us < 10 else 1),
               _fmt(r.gbps), _fmt(r.gops), _fmt(None if r.frac_bw is None else 100 * r.frac_bw, 0)]
        if peer_times:
            peer_s = peer_times.get((r.provider, r.shape, r.rows, r.threads))
            row += [_fmt(None if peer_s is None else peer_s * 1e6, 1), _fmt(None if peer_s is None else peer_s / r.median_s)]
        table.add_row(*row)
    Console(width=max(100, Console().width)).print(table)


def _render_gemv(rows: list[dict], policy_name: str = "", typical: dict[int, float] | None = None) -> None:
    """The GEMV table: each point's median call against the fastest-pass read bandwidth (% bw, the ceiling) and,
    when measured, against the median pass (% typ: a typical call over a typical pass, like for like) and against
    the median passes of the reads right before and after the point (% adj: the machine at that moment)."""
    from rich.console import Console
    from rich.table import Table

    from kernelmap.bench.runner import GEMV_FLOOR

    floor = f"{100 * GEMV_FLOOR:.0f}%"
    typ_bw = ", ".join(f"{k} thread{'s' if k > 1 else ''} {v:.1f} GB/s" for k, v in sorted((typical or {}).items()))
    title = f"decode GEMV (1 row) per weight type: fastest variant, share of read bandwidth (floor {floor})"
    if typ_bw:
        title += f"; % typ: of the median pass ({typ_bw})"
    table = Table(title=title)
    cols = ["weight", "provider", "variant", "shape", "threads", "median us", "GB/s", "% bw", f"< {floor}"]
    if typ_bw:
        cols += ["% typ", f"typ < {floor}"]
    adj = any(r.get("frac_bw_adjacent") is not None for r in rows)
    if adj:
        cols += ["% adj", f"adj < {floor}"]
    for col in cols + [policy_name or "policy"]:
        table.add_column(col, justify="right" if col not in ("weight", "provider", "variant", "shape") else "left")
    for r in rows:
        frac, ftyp = r["frac_bw"], r.get("frac_bw_typical")
        cells = [r["weight"], r["provider"], r["variant"], r["shape"], str(r["threads"]), _fmt(r["median_us"], 1),
                 _fmt(r["gbps"]), _fmt(None if frac is None else 100 * frac, 0),
                 "-" if frac is None else ("below" if r["below_floor"] else "")]
        if typ_bw:
            cells += [_fmt(None if ftyp is None else 100 * ftyp, 0),
                      "-" if ftyp is None else ("below" if r.get("below_floor_typical") else "")]
        if adj:
            fadj = r.get("frac_bw_adjacent")
            cells += [_fmt(None if fadj is None else 100 * fadj, 0),
                      "-" if fadj is None else ("below" if r.get("below_floor_adjacent") else "")]
        table.add_row(*cells, "yes" if r.get("in_policy") else "")
    console = Console(width=max(100, Console().width))
    console.print(table)

    def _points(sel: list[dict], key: str = "frac_bw") -> str:
        return ", ".join(f"{r['weight']} {r['shape']} t{r['threads']} {100 * r[key]:.0f}%" for r in sel)

    below = [r for r in rows if r["below_floor"]]
    mine = [r for r in below if r.get("in_policy") is not False]
    other = [r for r in below if r.get("in_policy") is False]
    if mine:
        console.print(f"below {floor} of read bandwidth ({policy_name or 'every provider'}): " + _points(mine))
    if other:
        console.print(f"below {floor}, providers {policy_name or 'the policy'} does not select: " + _points(other))
    if typ_bw:
        mine_typ = [r for r in rows if r.get("below_floor_typical") and r.get("in_policy") is not False]
        console.print(f"below {floor} of the median-pass read bandwidth ({policy_name or 'every provider'}): "
                      + (_points(mine_typ, "frac_bw_typical") if mine_typ else "none"))
    if adj:
        mine_adj = [r for r in rows if r.get("below_floor_adjacent") and r.get("in_policy") is not False]
        console.print(f"below {floor} of the read just before and after the point ({policy_name or 'every provider'}): "
                      + (_points(mine_adj, "frac_bw_adjacent") if mine_adj else "none"))


def _render_prefill(rows: list[dict]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="prefill GEMM per int8 weight type: fastest variant, GMAC/s (M*N*K / s) and share of the "
                        "int8 peak measured in this run (independent chains of the variant's instruction) and of its "
                        "lane step (32-element formats: independent steps of the whole per-dot sequence their contracts "
                        "need)")
    for col in ("weight", "provider", "variant", "shape", "rows", "threads", "median us", "GMAC/s", "instruction",
                "peak GMAC/s", "% peak", "lane-step GMAC/s", "% lane step"):
        table.add_column(col, justify="left" if col in ("weight", "provider", "variant", "shape", "instruction")
                         else "right")
    for r in rows:
        frac, lane = r["frac_peak"], r["frac_lane"]
        table.add_row(r["weight"], r["provider"], r["variant"], r["shape"], str(r["rows"]), str(r["threads"]),
                      _fmt(r["median_us"], 1), _fmt(r["gmacs"], 1), r["instruction"] or "-",
                      _fmt(r["peak_gmacs"], 0), _fmt(None if frac is None else 100 * frac, 1),
                      _fmt(r["lane_gmacs"], 0), _fmt(None if lane is None else 100 * lane, 1))
    Console(width=max(150, Console().width)).print(table)


def register(cli: click.Group) -> None:
    """Add `bench` to the CLI group."""
    cli.add_command(bench)
