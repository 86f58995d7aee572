"""CLI: `kernelmap cache` shows what the build cache holds and frees its model builds.

Input: the cache directory ($KERNELMAP_CACHE or the user cache dir) and its model-build limit
($KERNELMAP_MODEL_CACHE_GB, see compiler.evict_models). Output: the cache's parts with their sizes and the
model builds, least recently used first (or `--json`); `--prune` applies the limit now, `--clear` removes every
model build. A build another process holds locked (being built) is never removed; kernel objects and libraries
(shared by every model, a few MB) stay, so the next compile of a model only packs its weights again.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import click

__all__ = ["register"]

_PARTS = (("models", "model builds (packed weights, generated code)"), ("lib", "kernel libraries"),
          ("obj", "compiled kernel objects"), ("cdefs", "audit entries"))


def _size(path: Path) -> int:
    from kernelmap.compiler import _tree_bytes

    return _tree_bytes(path) if path.is_dir() else 0


def _mib(n: int) -> str:
    return f"{n / 2**20:.1f} MiB"


@click.command("cache")
@click.option("--prune", is_flag=True, help="Remove least recently used model builds beyond the limit now.")
@click.option("--clear", is_flag=True, help="Remove every model build (kernel objects and libraries stay).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def cache(prune: bool, clear: bool, as_json: bool) -> None:
    """Show the build cache (where, how big, which model builds) and free it.

    Model builds are kept up to KERNELMAP_MODEL_CACHE_GB GiB (default 10), the least recently used removed first
    after each new build.

    Examples: kernelmap cache; kernelmap cache --prune; KERNELMAP_MODEL_CACHE_GB=2 kernelmap cache --prune;
    kernelmap cache --clear
    """
    import sys

    from kernelmap.build.driver import cache_dir
    from kernelmap.compiler import MODEL_CACHE_ENV, evict_models, model_builds, model_cache_limit

    if prune and clear:
        raise click.UsageError("--prune and --clear are exclusive")
    root = cache_dir()
    limit = model_cache_limit()
    models = root / "models"
    removed: list[tuple[Path, int]] = []
    if clear or (prune and limit is not None):
        removed = evict_models(models, 0 if clear else limit, keep=None)
        for d, size in removed:
            print(f"removed {d.name} ({_mib(size)})", file=sys.stderr)
    now = time.time()
    builds = [{"key": d.name, "bytes": size, "idle_hours": round((now - used) / 3600, 1),
               "model": _model_of(d)} for used, d, size in model_builds(models)]
    doc = {"cache": str(root), "limit_bytes": limit, "limit_env": MODEL_CACHE_ENV,
           "parts": {name: _size(root / name) for name, _ in _PARTS}, "builds": builds,
           "removed": [{"key": d.name, "bytes": size} for d, size in removed]}
    if as_json:
        click.echo(json.dumps(doc, indent=1))
        return
    click.echo(f"cache: {root}")
    for name, what in _PARTS:
        click.echo(f"  {name + '/':8} {_mib(doc['parts'][name]):>12}  {what}")
    shown = "unlimited" if limit is None else f"{limit / 2**30:g} GiB"
    click.echo(f"model builds: {len(builds)}, {_mib(sum(b['bytes'] for b in builds))} (limit {shown}, "
               f"{MODEL_CACHE_ENV}); least recently used first:")
    for b in builds:
        click.echo(f"  {b['key']}  {_mib(b['bytes']):>12}  idle {b['idle_hours']:>7.1f} h  {b['model']}")


def _model_of(build: Path) -> str:
    """The GGUF a build was made from (its build.json), or '?' for a build that lacks it."""
    try:
        info = json.loads((build / "build.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return "?"
    gguf = info.get("gguf") if isinstance(info, dict) else None
    return gguf if isinstance(gguf, str) else "?"


def register(cli: click.Group) -> None:
    """Add `cache` to the CLI group."""
    cli.add_command(cache)
