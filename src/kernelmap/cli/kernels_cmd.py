"""CLI: `kernelmap kernels LIB.so` lists the kernels a compiled library really exports (probed, not assumed).

Input: a shared object path and the kernel maps. Output: a table or `--json` of (map id, variant,
symbol) rows, plus exported km_*__* symbols that no map owns. The probing lives in kernelmap.build.probe.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

__all__ = ["register"]


@click.command("kernels")
@click.argument("library", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the table as JSON.")
def kernels(library: Path, as_json: bool) -> None:
    """List the kernel-map variants a compiled kernel library exports (its dynamic symbol table).

    Example: kernelmap kernels ~/.cache/kernelmap/lib/<hash>/libkernels.so --json
    """
    from kernelmap.bench.providers import ProviderTable, load_providers
    from kernelmap.build.probe import available_kernels, unowned_kernels

    table = ProviderTable({p.id: p for p in load_providers()})
    rows = sorted(available_kernels(library, table))
    orphans = unowned_kernels(library, table)
    if as_json:
        doc = {"library": str(library),
               "kernels": [{"id": i, "variant": v, "symbol": s} for i, v, s in rows],
               "unowned": orphans}
        click.echo(json.dumps(doc, indent=1, sort_keys=True))
        return
    from rich.console import Console
    from rich.table import Table

    out = Table(title=f"{library.name}: {len(rows)} kernels")
    for col in ("map id", "variant", "symbol"):
        out.add_column(col)
    for row in rows:
        out.add_row(*row)
    Console().print(out)
    for sym in orphans:
        print(f"warning: {library}: exports {sym}, which no kernel map owns", file=sys.stderr)


def register(cli: click.Group) -> None:
    """Add `kernels` to the CLI group."""
    cli.add_command(kernels)
