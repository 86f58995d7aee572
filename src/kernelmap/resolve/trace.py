"""Resolve stage output: the selection trace, one entry per op instance, always written by a build.

Input: each resolution (or failure) as it happens. Output: `selection_trace.json`, schema
`kernelmap.selection_trace/1`: per op instance the request and one row per candidate, plus the
content hashes of the maps, circuit and policy. Deterministic bytes (sorted keys, no timestamps),
atomic write. It does not render (cli/explain_cmd.py does).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from kernelmap.errors import MapError, ResolutionError

__all__ = ["TRACE_SCHEMA", "SelectionTrace"]

TRACE_SCHEMA = "kernelmap.selection_trace/1"
_ENTRY_KEYS = {"label", "request", "rows", "selected", "error"}
_ROW_TEXT = ("provider", "decision", "stage", "status", "equivalence_group")


class SelectionTrace:
    """Entries (in resolution order) and hashes {maps, circuit, policy}."""

    def __init__(self, entries: Sequence[Mapping[str, Any]] = (), hashes: Mapping[str, str] | None = None,
                 fusions: Sequence[Mapping[str, Any]] = ()):
        self.entries: list[dict[str, Any]] = [dict(e) for e in entries]
        self.hashes: dict[str, str] = dict(hashes or {})
        self.fusions: list[dict[str, Any]] = [dict(f) for f in fusions]  # fusion decisions, when fusion ran

    def add(self, label: str, request: Any, outcome: Any) -> dict[str, Any]:
        """Record one op instance: `outcome` is a Resolution, a ResolutionError or a list of rows."""
        req = request.to_dict() if hasattr(request, "to_dict") else dict(request)
        entry_src = getattr(outcome, "trace_entry", None)
        if entry_src is not None:
            entry = {"label": label, "request": req, "rows": list(entry_src["rows"]),
                     "selected": entry_src.get("selected"), "error": entry_src.get("error")}
        elif isinstance(outcome, ResolutionError):
            entry = {"label": label, "request": req, "rows": [], "selected": None, "error": outcome.line()}
        else:
            entry = {"label": label, "request": req, "rows": [dict(r) for r in outcome], "selected": None,
                     "error": "no provider selected"}
        self.entries.append(entry)
        return entry

    def to_dict(self) -> dict[str, Any]:
        """The JSON document."""
        doc = {"schema": TRACE_SCHEMA, "hashes": dict(sorted(self.hashes.items())), "entries": self.entries}
        if self.fusions:
            doc["fusions"] = self.fusions
        return doc

    def dumps(self) -> str:
        """Deterministic JSON text (sorted keys, one trailing newline)."""
        return json.dumps(self.to_dict(), sort_keys=True, indent=1, ensure_ascii=True) + "\n"

    def write(self, path: Path | str) -> Path:
        """Write atomically (temp file in the same dir, then os.replace)."""
        path = Path(path)
        text = self.dumps()
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(text)
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
        return path

    def by_label(self, label: str) -> list[dict[str, Any]]:
        """Entries whose label is `label` (one per phase)."""
        return [e for e in self.entries if e["label"] == label]

    @classmethod
    def load(cls, path: Path | str) -> SelectionTrace:
        """Read a trace file; a wrong schema or shape raises MapError naming the file and pointer."""
        from kernelmap.maps.loader import parse_json

        path = Path(path)
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise MapError(f"cannot read selection trace: {exc.strerror}", path=path) from None
        doc = parse_json(data, path)
        if not isinstance(doc, dict) or doc.get("schema") != TRACE_SCHEMA:
            found = doc.get("schema") if isinstance(doc, dict) else type(doc).__name__
            raise MapError("not a selection trace", path=path, pointer="/schema", value=found,
                           expected=TRACE_SCHEMA)
        entries = doc.get("entries")
        if not isinstance(entries, list):
            raise MapError("entries must be a list", path=path, pointer="/entries")
        for i, e in enumerate(entries):
            if (not isinstance(e, dict) or not _ENTRY_KEYS <= set(e) or not isinstance(e["rows"], list)
                    or not isinstance(e["label"], str) or not isinstance(e["request"], dict)
                    or not all(isinstance(e["request"].get(k), str) for k in ("op", "phase"))
                    or not (e["selected"] is None or isinstance(e["selected"], dict))):
                raise MapError("malformed trace entry", path=path, pointer=f"/entries/{i}",
                               expected=sorted(_ENTRY_KEYS))
            for j, r in enumerate(e["rows"]):
                if (not isinstance(r, dict) or not all(isinstance(r.get(k), str) for k in _ROW_TEXT)
                        or isinstance(r.get("priority"), bool) or not isinstance(r.get("priority"), int)):
                    raise MapError("malformed trace row", path=path, pointer=f"/entries/{i}/rows/{j}",
                                   expected=sorted((*_ROW_TEXT, "priority")))
        hashes = doc.get("hashes", {})
        if not isinstance(hashes, dict):
            raise MapError("hashes must be an object", path=path, pointer="/hashes")
        fusions = doc.get("fusions", [])
        if not isinstance(fusions, list) or not all(isinstance(f, dict) for f in fusions):
            raise MapError("fusions must be a list of objects", path=path, pointer="/fusions")
        return cls(entries, hashes, fusions)
