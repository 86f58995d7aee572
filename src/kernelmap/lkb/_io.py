"""LKB stage, file boundary: read TOML/JSON registry files into schema-checked dicts, and write small TOML atomically.

Input: a path and a JSON Schema. Output: the loaded dict, or an `LKBError` naming the file and the key
(JSON pointer) that is wrong. It does not interpret the data (registry.py and evidence.py do).
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any

import jsonschema

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

from kernelmap.errors import LKBError

__all__ = ["read_json", "read_toml", "render_toml", "validate", "write_text_atomic"]

_LINE = re.compile(r"at line (\d+), column (\d+)")
_KEY = re.compile(r"^\s*([A-Za-z0-9_.\"-]+)\s*=")


def validate(data: Any, schema: dict[str, Any], path: Path | str) -> None:
    """Check `data` against `schema`; raise LKBError at the first (deepest, best-matching) violation."""
    validator = jsonschema.Draft202012Validator(schema)
    error = jsonschema.exceptions.best_match(validator.iter_errors(data))
    if error is None:
        return
    pointer = "/" + "/".join(str(p) for p in error.absolute_path)
    raise LKBError(error.message.splitlines()[0], path=path, pointer=pointer,
                   hint="see docs/LKB.md for the file format")


def read_toml(path: Path | str, schema: dict[str, Any] | None = None) -> dict[str, Any]:
    """Load a TOML file and validate it; syntax errors name the line and the key written on it."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise LKBError(f"cannot read file: {exc}", path=path) from exc
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        msg = str(exc).splitlines()[0]
        found = _LINE.search(msg)
        pointer = None
        if found:
            line_no = int(found.group(1))
            lines = text.splitlines()
            line = lines[line_no - 1] if 0 < line_no <= len(lines) else ""
            key = _KEY.match(line)
            pointer = key.group(1).strip('"') if key else f"line {line_no}"
        raise LKBError(f"malformed TOML: {msg[0].lower() + msg[1:]}", path=path, pointer=pointer) from exc
    if schema is not None:
        validate(data, schema, path)
    return data


def read_json(path: Path | str, schema: dict[str, Any] | None = None) -> Any:
    """Load a JSON file and validate it."""
    path = Path(path)
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise LKBError(f"cannot read file: {exc}", path=path) from exc
    except ValueError as exc:
        raise LKBError(f"malformed JSON: {exc}", path=path) from exc
    except RecursionError:
        raise LKBError("malformed JSON: nested too deeply", path=path) from None
    if schema is not None:
        validate(data, schema, path)
    return data


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        text = repr(value)
        return text if ("." in text or "e" in text or "n" in text) else text + ".0"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_scalar(v) for v in value) + "]"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    raise TypeError(f"cannot write {type(value).__name__} to TOML")


def render_toml(data: dict[str, Any]) -> str:
    """Render a dict of scalars and one level of tables (dicts of scalars) as TOML, keys in given order."""
    top = [f"{k} = {_scalar(v)}" for k, v in data.items() if not isinstance(v, dict)]
    parts = ["\n".join(top)] if top else []
    for key, table in data.items():
        if isinstance(table, dict):
            body = [f"[{key}]"] + [f"{k} = {_scalar(v)}" for k, v in table.items() if v is not None]
            parts.append("\n".join(body))
    return "\n\n".join(parts) + "\n"


def write_text_atomic(path: Path, text: str) -> None:
    """Write `text` to `path` through a temporary file and a rename (no half-written file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
