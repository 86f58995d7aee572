"""LKB stage, step profiles: the per-op time of one model step at C1/C16/C128, loaded from JSON or measured.

Input: a profile JSON (`kernelmap.lkb_profile/1`: rows -> list of {op, provider, variant, seconds}) or a
GGUF model for `measure`, which compiles it with per-op timing (`CompileOptions(profile=True)`), runs
decode steps (C1) or one prefill call of that many rows, and maps each op label to the provider variant
the selection trace records. Output: `{rows: [ProfileEntry, ...]}`. It does not classify ops.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelmap.errors import KernelmapError, LKBError
from kernelmap.lkb import schemas
from kernelmap.lkb._io import read_json

__all__ = ["PROFILE_SCHEMA", "ProfileEntry", "load_profile", "measure", "profile_document"]

PROFILE_SCHEMA = "kernelmap.lkb_profile/1"
DECODE_STEPS = 8
PREFILL_REPEATS = 2
_FIRST_TOKEN = 1000


@dataclass(frozen=True)
class ProfileEntry:
    """One op instance of a step: its label, the provider variant that ran it, and its seconds."""

    op: str
    provider: str
    variant: str
    seconds: float


def _entries(items: list[dict]) -> list[ProfileEntry]:
    return [ProfileEntry(e["op"], e["provider"], e["variant"], float(e["seconds"])) for e in items]


def load_profile(path: Path | str) -> dict[int, list[ProfileEntry]]:
    """A profile file as {rows: entries}; schema errors name the file and the JSON pointer."""
    data = read_json(path, schemas.PROFILE)
    return {int(rows): _entries(items) for rows, items in sorted(data["rows"].items(), key=lambda kv: int(kv[0]))}


def profile_document(steps: dict[int, list[ProfileEntry]], *, model: str = "", cls: str = "") -> dict[str, Any]:
    """The JSON document of `steps` (what `load_profile` reads back)."""
    doc: dict[str, Any] = {"schema": PROFILE_SCHEMA}
    if model:
        doc["model"] = model
    if cls:
        doc["class"] = cls
    doc["rows"] = {str(r): [{"op": e.op, "provider": e.provider, "variant": e.variant, "seconds": e.seconds}
                            for e in entries] for r, entries in sorted(steps.items())}
    return doc


@functools.lru_cache(maxsize=2)
def _loaded(model_path: str, max_rows: int) -> Any:
    """The profiling build of a model, loaded (cached per process: compiling takes a while)."""
    from kernelmap.compiler import CompileOptions, compile_model
    from kernelmap.runtime.model import Model

    compiled = compile_model(model_path, CompileOptions(profile=True, max_rows=max_rows))
    ctx = min(int(compiled.info["config"]["ctx_train"]), max_rows + DECODE_STEPS + 8)
    return Model(compiled, n_ctx=ctx)


def _selected(build_dir: Path, phase: str) -> dict[str, tuple[str, str]]:
    path = build_dir / "selection_trace.json"
    try:
        trace = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise LKBError(f"cannot read the selection trace: {exc}", path=path) from exc
    out = {}
    for entry in trace.get("entries", []):
        label, sel = entry.get("label", ""), entry.get("selected")
        if sel and label.startswith(phase + ":"):
            out[label[len(phase) + 1:]] = (sel["provider"], sel["variant"])
    return out


def _delta(model: Any, phase: str, run: Any, divide: int) -> list[tuple[str, float]]:
    before = dict(model.profile(phase))
    run()
    after = model.profile(phase)
    return [(label, (secs - before.get(label, 0.0)) / divide) for label, secs in after]


def measure(model_path: Path | str, rows: int) -> list[ProfileEntry]:
    """Per-op seconds of one step of the generated program for `model_path` at `rows` rows.

    rows == 1 is a decode step (mean of 8 after a short prompt); rows > 1 is one prefill call of that
    many rows (mean of 2, from an empty context). Seconds are the wall time of each op's team call.
    """
    if rows < 1:
        raise LKBError("row count must be at least 1", pointer="rows", value=rows)
    try:
        model = _loaded(str(model_path), max(128, rows))
    except KernelmapError as exc:
        raise LKBError(f"cannot build the profiling model: {exc.line()}", path=model_path,
                       hint=exc.hint) from exc
    if rows > model.n_ctx:
        raise LKBError("row count exceeds the model's context", pointer="rows", value=rows,
                       expected=f"at most {model.n_ctx}")
    tokens = [(_FIRST_TOKEN + i) % model.n_vocab for i in range(rows)]
    if rows == 1:
        phase = "decode"
        model.reset()
        model.prefill(tokens[:1] * 4)

        def run() -> None:
            for i in range(DECODE_STEPS):
                model.decode((tokens[0] + i % 2) % model.n_vocab)
        timed = _delta(model, phase, run, DECODE_STEPS)
    else:
        phase = "prefill"

        def run() -> None:
            for _ in range(PREFILL_REPEATS):
                model.reset()
                model.prefill(tokens)
        timed = _delta(model, phase, run, PREFILL_REPEATS)
    chosen = _selected(Path(model.compiled.build_dir), phase)
    out = []
    for label, secs in timed:
        if label not in chosen:
            raise LKBError("op has no selected provider in the selection trace", path=model.compiled.build_dir,
                           pointer=f"{phase}:{label}")
        out.append(ProfileEntry(label, chosen[label][0], chosen[label][1], max(secs, 0.0)))
    return out
