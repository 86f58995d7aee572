"""CLI: `kernelmap maps validate [FILES...] [--maps DIR] [--no-builtin]` and `kernelmap maps audit [--json]
[--check] [--write-baseline] [--base-ref main]`.

Input: the package's kernel maps (plus --maps dirs and FILES, validated as one registry). Output: a
one-line verdict, the audit counts (table or JSON), the baseline's edits since the git merge base,
and the ratchet check against audit_baseline.json. Only --write-baseline writes.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from kernelmap.errors import MapError
from kernelmap.maps.audit import (
    BASELINE_PATH,
    CEILING_KEYS,
    CLASSES,
    audit,
    baseline_at_merge_base,
    baseline_edits,
    check_baseline,
    check_baseline_edits,
    describe_edit,
    load_baseline,
    write_baseline,
)
from kernelmap.maps.loader import load_map
from kernelmap.maps.registry import KERNEL_ROOT, Registry, load_registry
from kernelmap.numerics import load_policy, policy_names

__all__ = ["register"]


def register(cli: click.Group) -> None:
    """Add the `maps` group to the CLI."""

    @cli.group("maps", epilog="Example: kernelmap maps audit --check")
    def maps() -> None:
        """Validate and audit the kernel maps."""

    @maps.command("validate", epilog="Example: kernelmap maps validate my_maps/linear_x.json --maps more_maps/")
    @click.argument("files", nargs=-1, type=click.Path(dir_okay=False))
    @click.option("--maps", "dirs", multiple=True, type=click.Path(file_okay=False), help="Extra map dir.")
    @click.option("--no-builtin", is_flag=True, help="Leave out the package's own maps (only FILES and --maps).")
    def validate(files: tuple[str, ...], dirs: tuple[str, ...], no_builtin: bool) -> None:
        """Check every map, the registry they form together, the shipped policies and the baseline.

        FILES are validated as one registry with the builtin maps (unless --no-builtin) and the --maps
        dirs, so a duplicate id or a priority tie between a new map and an existing one is found.
        """
        reg = _registry(files, dirs, builtin=not no_builtin)
        if files:
            n = len(files)
            click.echo(f"ok: {n} map file{'s' if n != 1 else ''} valid; registry of {len(reg)} maps "
                       f"({'without' if no_builtin else 'with'} the builtin maps) has no duplicate id or tie")
            return
        policies = [load_policy(name) for name in policy_names()]
        load_baseline()
        click.echo(f"ok: {len(reg)} maps, {len(reg.ops)} ops, registry sha256 {reg.hash}; "
                   f"policies {', '.join(p.name for p in policies)}; audit baseline ok")

    @maps.command("audit", epilog="Example: kernelmap maps audit --check")
    @click.option("--json", "json_out", is_flag=True, help="Print the full report as JSON.")
    @click.option("--check", is_flag=True,
                  help="Fail (exit 1) if a floor or ceiling regressed, or if the baseline was loosened since the "
                       "merge base with --base-ref without a reason in its `loosened` list.")
    @click.option("--write-baseline", "write_flag", is_flag=True,
                  help="Ratchet the baseline: raise floors to current counts, lower ceilings; never the reverse.")
    @click.option("--baseline", type=click.Path(dir_okay=False), default=None,
                  help="Baseline file (default: the package's audit_baseline.json).")
    @click.option("--base-ref", default="main", show_default=True,
                  help="Git branch whose merge base with HEAD holds the baseline to compare with.")
    def audit_command(json_out: bool, check: bool, write_flag: bool, baseline: str | None, base_ref: str) -> None:
        """Classify every map, scan the compiler's Python and C, and compare with the ratchet baseline."""
        path = Path(baseline) if baseline else BASELINE_PATH
        base = load_baseline(path)
        old, since = baseline_at_merge_base(path, base_ref)
        edits = baseline_edits(old, base) if old is not None else []
        report = audit(load_registry(), baseline=base)
        if json_out:
            sys.stdout.write(json.dumps(report, sort_keys=True, indent=1) + "\n")
        else:
            _print_counts(report, base)
        # The baseline's own history is always shown: a loosening is visible even when it has a reason.
        if old is None:
            click.echo(f"baseline history: {since}", err=True)
        else:
            click.echo(f"baseline vs {since}: " + ("; ".join(describe_edit(e) for e in edits) or "unchanged"),
                       err=True)
            for entry in base.get("loosened", []):
                if any(e["key"] == entry["key"] and e["to"] == entry["to"] and e["loosens"] for e in edits):
                    click.echo(f"baseline loosened: {entry['key']} -> {entry['to']}: {entry['reason']}", err=True)
        if check:
            problems = check_baseline(report, base) + (check_baseline_edits(edits, base, since) if old else [])
            if problems:
                raise MapError("audit regressed: " + "; ".join(problems), path=path,
                               hint="fix the regression; floors may only rise and ceilings only fall")
            click.echo("audit check ok: every floor and ceiling holds", err=json_out)
        if write_flag:
            new = write_baseline(report, base, path)
            click.echo(f"baseline written to {path}: floors {new['floors']}, ceilings {new['ceilings']}",
                       err=True)


def _registry(files: tuple[str, ...], dirs: tuple[str, ...], *, builtin: bool) -> Registry:
    """The registry of the builtin maps (if `builtin`), the `dirs` and the `files`; a file that is already
    one of those maps (same path) is loaded once."""
    base = load_registry(dirs, builtin=builtin, trusted=False)  # validate: every schema check runs
    given = {Path(f).resolve() for f in files}
    providers = [p for p in base.providers.values() if p.path.resolve() not in given]
    providers += [load_map(f, kernel_root=KERNEL_ROOT, trusted=False) for f in dict.fromkeys(files)]
    return Registry(providers)


def _print_counts(report: dict, base: dict) -> None:
    table = Table(title=f"kernel map audit: {report['counts']['maps']} maps", title_justify="left")
    for col in ("class", "count", "bound"):
        table.add_column(col)
    for name in (*CLASSES, *CEILING_KEYS):
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
        click.echo(f"model-family {f.get('kind', 'literal')}: {f['file']}:{f['line']} ({', '.join(f['words'])})")
    for f in report["abi_mismatches"]:
        click.echo(f"abi mismatch: {f['map']}: {f['problem']}")
    for f in report["unowned_kernel_symbols"]:
        click.echo(f"unowned kernel symbol: {f['file']}:{f['line']} {f['symbol']} (no map owns it; rename the helper)")
