"""CLI: `kernelmap explain` renders a selection trace: why each op instance got its provider, and why not X.

Input: a selection_trace.json (or a build dir holding one). Output: rich tables on stdout, or JSON
with --json. It does not resolve anything; `render_trace` is the reusable renderer.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import IO, Any

import click
from rich.console import Console
from rich.table import Table

from kernelmap.errors import RequestError, closest
from kernelmap.resolve.filter import STAGES
from kernelmap.resolve.trace import SelectionTrace

__all__ = ["register", "render_rows", "render_trace"]

_STAGE_ORDER = {s: i for i, s in enumerate(STAGES)}


def _console(file: IO[str]) -> Console:
    tty = getattr(file, "isatty", lambda: False)()
    return Console(file=file, width=None if tty else 200, no_color=not tty, highlight=False,
                   soft_wrap=not tty)


def _row_order(r: dict[str, Any]) -> tuple[Any, ...]:
    decision = {"selected": 0, "ranked": 1, "rejected": 2}.get(r["decision"], 3)
    return (decision, r.get("rank", 0), -_STAGE_ORDER.get(r["stage"], 0), r["provider"], r.get("variant", ""))


def render_rows(rows: list[dict[str, Any]], title: str, file: IO[str]) -> None:
    """One table of candidate rows: selected first, then ranked, then rejected (furthest stage first)."""
    table = Table(title=title, title_justify="left", show_lines=False)
    for col in ("provider", "variant", "decision", "stage", "reason / rank", "status", "prio", "group",
                "detail"):
        table.add_column(col, overflow="fold")
    for r in sorted(rows, key=_row_order):
        why = r.get("reason") if r["decision"] == "rejected" else f"rank {r.get('rank', 0)}"
        style = {"selected": "bold green", "rejected": "dim"}.get(r["decision"])
        table.add_row(r["provider"], r.get("variant", ""), r["decision"], r["stage"], str(why), r["status"],
                      str(r["priority"]), r["equivalence_group"], r.get("detail", ""), style=style)
    _console(file).print(table)


def _title(e: dict[str, Any]) -> str:
    req = e["request"]
    sel = e.get("selected")
    head = f"{e['label']}  op={req['op']} phase={req['phase']}"
    if req.get("contract"):
        head += f" contract={req['contract']}"
    if sel:
        return head + f"  -> {sel['provider']}/{sel['variant']}"
    return head + f"  -> FAILED: {e.get('error') or 'no provider'}"


def _pick(trace: SelectionTrace, op: str | None, provider: str | None) -> list[dict[str, Any]]:
    entries = trace.entries
    if op is not None:
        entries = trace.by_label(op)
        if not entries:
            labels = sorted({e["label"] for e in trace.entries})
            near = closest(op, labels)
            raise RequestError("no op instance with this label in the trace", pointer="--op", value=op,
                               hint=f"closest: {near}" if near else f"{len(labels)} labels in the trace")
    if provider is not None:
        entries = [e for e in entries if any(r["provider"] == provider for r in e["rows"])]
        if not entries:
            known = sorted({r["provider"] for e in trace.entries for r in e["rows"]})
            near = closest(provider, known)
            where = f" for op {op}" if op else ""
            raise RequestError(f"provider was never a candidate{where}", pointer="--provider", value=provider,
                               hint=f"closest: {near}" if near else "it implements none of the traced ops")
    return entries


def render_trace(trace: SelectionTrace, op: str | None = None, provider: str | None = None,
                 json_out: bool = False, *, file: IO[str] | None = None) -> None:
    """Render a trace: a summary, one op's candidates (--op), or why provider X lost (--provider)."""
    out = file or sys.stdout
    entries = _pick(trace, op, provider)
    if provider is not None:
        entries = [dict(e, rows=[r for r in e["rows"] if r["provider"] == provider]) for e in entries]
    if json_out:
        doc = trace.to_dict() if op is None and provider is None else dict(trace.to_dict(), entries=entries)
        out.write(json.dumps(doc, sort_keys=True, indent=1) + "\n")
        return
    if op is None and provider is None:
        table = Table(title=f"selection trace: {len(entries)} op instances", title_justify="left")
        for col in ("op instance", "op", "phase", "selected", "variant", "candidates", "rejected"):
            table.add_column(col, overflow="fold")
        for e in entries:
            sel = e.get("selected") or {}
            prov_rows = [r for r in e["rows"] if "variant" not in r or r["stage"] == "rank"]
            rejected = sum(1 for r in prov_rows if r["decision"] == "rejected")
            by = next((r.get("variant_by") for r in e["rows"] if r["decision"] == "selected"), None)
            variant = sel.get("variant", "") + (" (by evidence)" if by == "evidence" else "")
            table.add_row(e["label"], e["request"]["op"], e["request"]["phase"],
                          sel.get("provider", "FAILED"), variant, str(len(prov_rows)),
                          str(rejected), style=None if sel else "bold red")
        con = _console(out)
        con.print(table)
        for k, v in sorted(trace.hashes.items()):
            con.print(f"{k} sha256 {v}")
        if trace.fusions:
            from kernelmap.plan.fuse import fusion_lines

            applied = sum(1 for f in trace.fusions if f.get("decision") == "applied")
            con.print(f"fusions: {applied} applied of {len(trace.fusions)} decisions")
            for line in fusion_lines(trace.fusions):
                con.print("  " + line)
        return
    for e in entries:
        render_rows(e["rows"], _title(e), out)


def _trace_path(target: str | None) -> Path:
    if target is None:
        raise RequestError("no selection trace given", pointer="TRACE",
                           hint="pass a selection_trace.json or a build directory, e.g. kernelmap explain build/")
    path = Path(target)
    if path.is_dir():
        path = path / "selection_trace.json"
    return path


def register(cli: click.Group) -> None:
    """Add `explain` to the CLI group."""

    @cli.command("explain", epilog="Example: kernelmap explain build/ --op blk.3.attn_q --provider linear_q8_0_q8_0")
    @click.argument("target", required=False, metavar="[TRACE.json | BUILD_DIR]")
    @click.option("-m", "--model", type=click.Path(dir_okay=False), default=None,
                  help="Compile this GGUF (cached) and explain its build instead of a trace file.")
    @click.option("--op", "op", metavar="LABEL", help="Show one op instance (e.g. decode:blk.3.attn_q).")
    @click.option("--provider", metavar="ID", help="Why (not) provider ID, for every op where it was a candidate.")
    @click.option("--json", "json_out", is_flag=True, help="Print JSON on stdout.")
    def explain(target: str | None, model: str | None, op: str | None, provider: str | None,
                json_out: bool) -> None:
        """Explain kernel choices recorded in a selection trace (and the fusions applied)."""
        if model is not None:
            from kernelmap.compiler import compile_model

            target = str(compile_model(Path(model)).build_dir)
        render_trace(SelectionTrace.load(_trace_path(target)), op=op, provider=provider, json_out=json_out)
