"""CLI: `kernelmap parity --tier N` runs the parity tiers against a compiled model and prints each check."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from kernelmap.runtime.model import MAX_THREADS

__all__ = ["register"]

_SPEC = Path(__file__).resolve().parent.parent / "runtime" / "default_model.json"
_DEFAULT_FIXTURES = Path(__file__).resolve().parents[3] / json.loads(_SPEC.read_text())["peer_fixtures"]


@click.command("parity")
@click.option("-m", "--model", type=click.Path(dir_okay=False), default=None, help="GGUF model (default model if omitted).")
@click.option("--tier", "tiers", type=click.IntRange(1, 3), multiple=True, help="Tier(s) to run (default: 1 and 2).")
@click.option("--fixtures", type=click.Path(file_okay=False), default=str(_DEFAULT_FIXTURES), show_default=True,
              help="Directory of the peer's fixtures (make fixtures).")
@click.option("-t", "--threads", type=click.IntRange(1, MAX_THREADS), default=2, show_default=True)
@click.option("--policy", default="llama-cpu", show_default=True, help="Numerics policy to compile with.")
@click.option("--reference/--no-reference", default=True, help="Also compare with the NumPy reference (tier 2).")
@click.option("--json", "json_out", is_flag=True)
@click.option("--matrix", is_flag=True, help="Instead: the family x preset matrix on the family fixtures.")
@click.option("--markdown", is_flag=True, help="With --matrix: print the README table.")
@click.option("--matrix-fixtures", type=click.Path(file_okay=False), default=None,
              help="With --matrix: the family fixtures (default tests/fixtures/families).")
@click.option("--isa", default=None, help="With --matrix: target ISA (scalar = the ref kernels; default: this CPU).")
def parity_command(model: str | None, tiers: tuple[int, ...], fixtures: str, threads: int, policy: str,
                   reference: bool, json_out: bool, matrix: bool, markdown: bool, matrix_fixtures: str | None,
                   isa: str | None) -> None:
    """Check a compiled model: 1 self-consistency, 2 agreement with llama.cpp and the reference, 3 perplexity.

    Exits 1 when any check fails. Example: kernelmap parity --tier 2 --fixtures tests/fixtures/llama_fa
    (kernelmap parity --matrix --markdown prints the product-space table of the README.)
    """
    if matrix:
        _matrix(matrix_fixtures, policy, isa, threads, json_out, markdown)
        return
    from kernelmap.parity import tier1, tier2, tier3
    from kernelmap.runtime import default_model_path, load

    gguf = Path(model) if model else default_model_path()
    from kernelmap.compiler import CompileOptions

    m = load(gguf, threads=threads, n_ctx=1024, options=CompileOptions(policy=policy))
    checks = []
    with m:
        probe = m.tokenizer.encode("The quick brown fox jumps over the lazy dog because it")
        for tier in sorted(set(tiers or (1, 2))):
            if tier == 1:
                checks += tier1(m, probe)
            elif tier == 2:
                ref = None
                if reference:
                    from kernelmap.reference.forward import Reference

                    ref = Reference(gguf, n_ctx=256)
                checks += tier2(m, Path(fixtures), reference=ref)
            else:
                checks += tier3(m, Path(fixtures))
    if json_out:
        print(json.dumps([c.as_dict() for c in checks]))
    else:
        for c in checks:
            print(f"tier {c.tier} {'PASS' if c.passed else 'FAIL'}  {c.name}: {c.value} (bar: {c.bar})")
    if not all(c.passed for c in checks):
        sys.exit(1)


def _matrix(fixtures: str | None, policy: str, isa: str | None, threads: int, json_out: bool, markdown: bool) -> None:
    """`--matrix`: every (architecture, preset) cell of the family fixtures against llama.cpp's logits."""
    import tempfile

    from kernelmap.compiler import CompileOptions
    from kernelmap.families.matrix import DEFAULT_FIXTURES, load_fixtures, markdown_table, run_matrix
    from kernelmap.target import parse_isa

    fx = load_fixtures(Path(fixtures) if fixtures else DEFAULT_FIXTURES)
    options = CompileOptions(policy=policy, max_rows=16, isa=parse_isa(isa) if isa else None)
    with tempfile.TemporaryDirectory(prefix="km-matrix-") as work:
        cells = run_matrix(fx, work=Path(work), options=options, threads=min(threads, 2))
    if json_out:
        print(json.dumps([c.as_dict() for c in cells]))
    elif markdown:
        print(markdown_table(cells))
    else:
        for c in cells:
            print(f"{'PASS' if c.ok else 'FAIL'}  {c.arch:10s} {c.preset:7s} {c.text()}")
    if not all(c.ok for c in cells):
        sys.exit(1)


def register(cli: click.Group) -> None:
    """Add `parity` to the CLI."""
    cli.add_command(parity_command)
