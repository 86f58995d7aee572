"""CLI: `kernelmap maps validate` and `kernelmap maps audit [--json] [--check] [--write-baseline]`.

Input: the package's kernel maps (plus --maps dirs). Output: a one-line verdict, the audit counts
(table or JSON), and the ratchet check against audit_baseline.json. Only --write-baseline writes.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from kernelmap.errors import MapError
from kernelmap.maps.audit import BASELINE_PATH, CLASSES, audit, check_baseline, load_baseline, write_baseline
from kernelmap.maps.loader import load_map
from kernelmap.maps.registry import KERNEL_ROOT, load_registry
from kernelmap.numerics import load_policy, policy_names

__all__ = ["register"]


def register(cli: click.Group) -> None:
    """Add the `maps` group to the CLI."""

    @cli.group("maps", epilog="Example: kernelmap maps audit --check")
    def maps() -> None:
        """Validate and audit the kernel maps."""

    @maps.command("validate", epilog="Example: kernelmap maps validate --maps my_maps/")
    @click.argument("files", nargs=-1, type=click.Path(dir_okay=False))
    @click.option("--maps", "dirs", multiple=True, type=click.Path(file_okay=False), help="Extra map dir.")
    def validate(files: tuple[str, ...], dirs: tuple[str, ...]) -> None:
        """Check every map (or the given FILES), the registry as a whole, the shipped policies and the baseline."""
        if files:
            for f in files:
                load_map(f, kernel_root=KERNEL_ROOT)
            click.echo(f"ok: {len(files)} map file{'s' if len(files) != 1 else ''} valid")
            return
        reg = load_registry(dirs)
        policies = [load_policy(name) for name in policy_names()]
        load_baseline()
        click.echo(f"ok: {len(reg)} maps, {len(reg.ops)} ops, registry sha256 {reg.hash}; "
                   f"policies {', '.join(p.name for p in policies)}; audit baseline ok")

    @maps.command("audit", epilog="Example: kernelmap maps audit --check")
    @click.option("--json", "json_out", is_flag=True, help="Print the full report as JSON.")
    @click.option("--check", is_flag=True, help="Fail (exit 1) if a floor or ceiling of the baseline regressed.")
    @click.option("--write-baseline", "write_flag", is_flag=True,
                  help="Ratchet the baseline: raise floors to current counts, lower ceilings; never the reverse.")
    @click.option("--baseline", type=click.Path(dir_okay=False), default=None,
                  help="Baseline file (default: the package's audit_baseline.json).")
    def audit_command(json_out: bool, check: bool, write_flag: bool, baseline: str | None) -> None:
        """Classify every map, scan the compiler's Python, and compare with the ratchet baseline."""
        path = Path(baseline) if baseline else BASELINE_PATH
        base = load_baseline(path)
        report = audit(load_registry(), baseline=base)
        if json_out:
            sys.stdout.write(json.dumps(report, sort_keys=True, indent=1) + "\n")
        else:
            _print_counts(report, base)
        if check:
            problems = check_baseline(report, base)
            if problems:
                raise MapError("audit regressed: " + "; ".join(problems), path=path,
                               hint="fix the regression; floors may only rise and ceilings only fall")
            click.echo("audit check ok: every floor and ceiling holds", err=json_out)
        if write_flag:
            new = write_baseline(report, base, path)
            click.echo(f"baseline written to {path}: floors {new['floors']}, ceilings {new['ceilings']}",
                       err=True)


def _print_counts(report: dict, base: dict) -> None:
    table = Table(title=f"kernel map audit: {report['counts']['maps']} maps", title_justify="left")
    for col in ("class", "count", "bound"):
        table.add_column(col)
    for name in (*CLASSES, "model_family_literals", "op_name_conditionals"):
        if name in base["floors"]:
            bound = f"floor {base['floors'][name]}"
        elif name in base["ceilings"]:
            bound = f"ceiling {base['ceilings'][name]}"
        else:
            bound = ""
        table.add_row(name, str(report["counts"][name]), bound)
    tty = sys.stdout.isatty()
    Console(file=sys.stdout, highlight=False, no_color=not tty, width=None if tty else 120).print(table)
    for f in report["model_family_literals"]:
        click.echo(f"model-family literal: {f['file']}:{f['line']} ({', '.join(f['words'])})")
