"""`kernelmap inspect FILE [--tensors] [--json]`: show a GGUF file's header, metadata and tensor table.

Input: a GGUF path, read through the validated reader. Output: rich tables on stdout, or one JSON
document with `--json`. It prints; it does not interpret the model (config, tokenizer).
"""

from __future__ import annotations

import json
import math
from collections import Counter
from typing import Any

import click

from kernelmap.gguf import GGUFArray, GGUFFile, ValueType, open_gguf

__all__ = ["register", "describe"]

_HEAD = 8
_MAX_TEXT = 96


def _printable(text: str, limit: int = _MAX_TEXT) -> str:
    """Escape control characters (terminal escapes in metadata are hostile) and shorten."""
    out = "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)
    return out if len(out) <= limit else out[: limit - 3] + "..."


def _type_label(types: tuple[ValueType, ...]) -> str:
    return "[" + types[1].name.lower() + "]" if types[0] == ValueType.ARRAY else types[0].name.lower()


def _jsonable(value: Any) -> Any:
    """Non-finite floats become strings ("nan", "inf") so the output stays strict JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


def _json_value(f: GGUFFile, key: str) -> Any:
    value = f.metadata[key]
    if isinstance(value, GGUFArray):
        head = [_jsonable(value[i]) for i in range(min(_HEAD, len(value)))]
        return {"length": len(value), "head": head}
    return _jsonable(value)


def describe(f: GGUFFile, *, tensors: bool) -> dict[str, Any]:
    """The machine-readable summary `--json` prints (stable keys)."""
    type_counts = Counter(t.type_name for t in f.tensors.values())
    total = sum(t.as_dict()["n_bytes"] or 0 for t in f.tensors.values())
    doc: dict[str, Any] = {
        "schema": "kernelmap.inspect/1",
        "path": f.path,
        "version": f.version,
        "alignment": f.alignment,
        "data_offset": f.data_offset,
        "file_size": f.size,
        "n_metadata": len(f.metadata),
        "n_tensors": len(f.tensors),
        "tensor_bytes": total,
        "tensor_types": dict(sorted(type_counts.items())),
        "metadata": [{"key": k, "type": _type_label(f.metadata_types(k)), "value": _json_value(f, k)}
                     for k in f.metadata],
    }
    if tensors:
        doc["tensors"] = [t.as_dict() for t in f.tensors.values()]
    return doc


def _show_value(f: GGUFFile, key: str) -> str:
    value = f.metadata[key]
    if isinstance(value, GGUFArray):
        head = ", ".join(_printable(repr(value[i]), 24) for i in range(min(4, len(value))))
        more = ", ..." if len(value) > 4 else ""
        return f"{len(value)} items: [{head}{more}]"
    if isinstance(value, str):
        return _printable(repr(value))
    return _printable(str(value))


def _render(f: GGUFFile, *, tensors: bool) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    console = Console()
    doc = describe(f, tensors=False)
    summary = Table(show_header=False, box=None, pad_edge=False)
    for label, value in (("file", _printable(f.path, 200)), ("version", f.version), ("alignment", f.alignment),
                         ("metadata keys", doc["n_metadata"]), ("tensors", doc["n_tensors"]),
                         ("tensor bytes", f"{doc['tensor_bytes']:,}"),
                         ("types", ", ".join(f"{k}: {v}" for k, v in doc["tensor_types"].items()))):
        summary.add_row(Text(label, style="bold"), Text(str(value)))
    console.print(summary)
    meta = Table(title="metadata", title_justify="left")
    meta.add_column("key", overflow="fold")
    meta.add_column("type")
    meta.add_column("value", overflow="fold")
    for key in f.metadata:
        meta.add_row(Text(_printable(key)), Text(_type_label(f.metadata_types(key))), Text(_show_value(f, key)))
    console.print(meta)
    if tensors:
        table = Table(title="tensors", title_justify="left")
        for col, justify in (("#", "right"), ("name", "left"), ("type", "left"), ("shape (ne0 first)", "left"),
                             ("offset", "right"), ("bytes", "right")):
            table.add_column(col, justify=justify)  # type: ignore[arg-type]
        for t in f.tensors.values():
            d = t.as_dict()
            table.add_row(str(t.index), Text(_printable(t.name)), t.type_name,
                          "×".join(str(s) for s in t.shape), f"{t.offset:,}",
                          "?" if d["n_bytes"] is None else f"{d['n_bytes']:,}")
        console.print(table)


def register(cli: click.Group) -> None:
    """Attach the `inspect` command to the CLI group."""

    @cli.command("inspect")
    @click.argument("file", type=click.Path(dir_okay=False))
    @click.option("--tensors", is_flag=True, help="Also list every tensor (name, type, shape, offset, bytes).")
    @click.option("--json", "as_json", is_flag=True, help="Print one JSON document instead of tables.")
    def inspect_cmd(file: str, tensors: bool, as_json: bool) -> None:
        """Show a GGUF file's header, metadata and (with --tensors) its tensor table.

        Example: kernelmap inspect gemma-3-270m-q4_k_m.gguf --tensors
        """
        with open_gguf(file) as f:
            if as_json:
                click.echo(json.dumps(describe(f, tensors=tensors), indent=1, allow_nan=False))
            else:
                _render(f, tensors=tensors)
