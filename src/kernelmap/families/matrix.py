"""Parity matrix: for every (architecture, preset) fixture, the compiled model's logits against llama.cpp's.

Input: the family fixtures (manifest.json, the quantized models, llama.cpp's tokens and logits; the F16
source is re-made from its seed and checked by sha256) and compile options. Output: one `Cell` per
(architecture, preset): bit-exact, within tolerance (with the reason, from matrix.json), or refused
(with the compiler's one-line reason), plus the markdown table for the README. It never runs llama.cpp.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from kernelmap.errors import KernelmapError, ModelError, PolicyError, ResolutionError

__all__ = ["Cell", "DEFAULT_FIXTURES", "load_fixtures", "markdown_table", "matrix_spec", "run_cell", "run_matrix"]

SPEC_PATH = Path(__file__).resolve().parent / "matrix.json"
DEFAULT_FIXTURES = Path(__file__).resolve().parents[3] / "tests" / "fixtures" / "families"


@functools.cache
def matrix_spec() -> dict[str, Any]:
    """matrix.json: presets, the tolerance bar, contracts that differ from llama.cpp's arithmetic and why."""
    return json.loads(SPEC_PATH.read_text(encoding="utf-8"))


@dataclass
class Cell:
    """One cell of the matrix: what was compared and what it showed."""

    arch: str
    preset: str
    status: str  # bit-exact | tolerance | refused | failed
    positions: int = 0
    mismatched_logits: int = 0
    max_abs_diff: float = 0.0
    rel_diff: float = 0.0
    top1_agree: int = 0
    greedy_identical: bool | None = None
    prefill_exact: bool | None = None
    contracts: list[str] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    error: str = ""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def expected_exact(self) -> bool:
        """Bit-exact is required when no selected contract is listed as differing from llama.cpp."""
        return not self.reasons

    @property
    def ok(self) -> bool:
        """Whether the cell meets its bar (see matrix.json's description)."""
        if self.status == "refused":
            return True
        if self.status == "bit-exact":
            return bool(self.greedy_identical) and self.prefill_exact is not False
        if self.status == "tolerance":
            return (not self.expected_exact and self.rel_diff <= float(matrix_spec()["tolerance_rel"])
                    and self.top1_agree == self.positions)
        return False

    def text(self) -> str:
        """The README cell."""
        if self.status == "bit-exact":
            return "bit-exact"
        if self.status == "tolerance":
            why = "; ".join(r.split(": ", 1)[-1] for r in self.reasons) or "unexplained"
            return f"tolerance {self.rel_diff:.1e} x max logit, top-1 {self.top1_agree}/{self.positions}: {why}"
        if self.status == "refused":
            return f"refused: {self.error}"
        return f"FAILED: {self.error}"


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def load_fixtures(directory: Path = DEFAULT_FIXTURES) -> dict[str, Any]:
    """The fixture manifest (ModelError with the command that makes it when absent)."""
    path = Path(directory) / "manifest.json"
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ModelError("family fixtures not found", path=path,
                         hint="run tests/fixtures/families/make_family_fixtures.py with the peer") from None
    except json.JSONDecodeError as exc:
        raise ModelError(f"fixture manifest is not valid JSON: {exc}", path=path) from None
    except RecursionError:
        raise ModelError("fixture manifest is not valid JSON: nested too deeply", path=path) from None
    doc["_dir"] = str(Path(directory))
    return doc


def model_path(fixtures: dict[str, Any], arch: str, preset: str, work: Path) -> Path:
    """The cell's GGUF: the committed file, or the F16 source written again from its seed (sha256-checked)."""
    entry = fixtures["models"][arch]
    info = entry["presets"][preset]
    base = Path(fixtures["_dir"])
    if info.get("file"):
        path = base / info["file"]
    else:
        from kernelmap.synth import read_tokenizer, resolve_dims, write_model

        tok_from = base / entry["presets"]["Q8_0"]["file"]
        name, dims = resolve_dims(entry.get("arch", arch), entry["dims"])  # a row may be an architecture at other dims
        dims = {**dims, **entry.get("overrides", {})}
        path = Path(work) / f"{arch}-{preset}.gguf"
        if not path.exists() or _sha(path) != info["sha256"]:
            write_model(path, name, dims, read_tokenizer(tok_from, keep=dims.get("vocab_keep")),
                        seed=int(entry["seed"]), name="synthetic tiny")
    if _sha(path) != info["sha256"]:
        raise ModelError("fixture model differs from the one llama.cpp ran", path=path, pointer="sha256",
                         value=_sha(path)[:16], expected=info["sha256"][:16],
                         hint="make the fixtures again (tests/fixtures/families/make_family_fixtures.py)")
    return path


def _selected_contracts(compiled: Any) -> list[str]:
    from kernelmap.maps.registry import load_registry

    providers = load_registry().providers
    return sorted({providers[row[2]].contract for row in compiled.info["selection"] if row[2] in providers})


def run_cell(fixtures: dict[str, Any], arch: str, preset: str, *, work: Path, options: Any = None,
             threads: int = 1) -> Cell:
    """Compile one cell, run llama.cpp's token sequence one token per decode, compare every logit."""
    from kernelmap.compiler import CompileOptions, compile_model
    from kernelmap.runtime.model import Model

    options = options or CompileOptions(max_rows=16)
    peer = np.load(Path(fixtures["_dir"]) / "peer" / f"{arch}-{preset}.npz")
    tokens = [int(t) for t in peer["tokens"]]
    want = np.asarray(peer["logits"], np.float32)
    prompt = list(fixtures["models"][arch]["prompt"])
    try:
        path = model_path(fixtures, arch, preset, work)
        compiled = compile_model(path, options)
    except (PolicyError, ResolutionError) as exc:
        return Cell(arch, preset, "refused", error=exc.message.split(" (op ")[0])
    except ModelError as exc:
        if (exc.pointer or "").endswith("/type"):  # a weight type the policy has no rule for, named
            return Cell(arch, preset, "refused", error=f"{exc.pointer}: {exc.message} (found {exc.value})")
        return Cell(arch, preset, "failed", error=exc.line())
    except KernelmapError as exc:
        return Cell(arch, preset, "failed", error=exc.line())
    contracts = _selected_contracts(compiled)
    not_peer = matrix_spec()["not_peer_order"]
    reasons = [f"{c}: {not_peer[c]}" for c in contracts if c in not_peer]
    model = Model(compiled, n_ctx=max(64, len(tokens) + 1), threads=threads)
    try:
        model.reset()
        got = np.stack([(model.prefill([t]) if i == 0 else model.decode(t)).copy() for i, t in enumerate(tokens)])
        model.reset()
        prefill_last = model.prefill(prompt).copy()
        model.reset()
        greedy = list(model.stream(prompt, len(tokens) - len(prompt), stop=()))
    finally:
        model.close()
    diff = np.abs(got.astype(np.float64) - want.astype(np.float64))
    scale = float(np.max(np.abs(want))) or 1.0
    # bit-exact means the bit patterns: a value comparison calls -0.0 and +0.0 equal and a NaN unequal to itself
    bits, want_bits = got.astype(np.float32).view(np.uint32), want.view(np.uint32)
    cell = Cell(arch, preset, "bit-exact", positions=len(tokens), mismatched_logits=int(np.sum(bits != want_bits)),
                max_abs_diff=float(diff.max()), rel_diff=float(diff.max()) / scale,
                top1_agree=int(np.sum(got.argmax(1) == want.argmax(1))),
                greedy_identical=prompt + greedy == tokens,
                prefill_exact=bool(np.array_equal(prefill_last.astype(np.float32).view(np.uint32),
                                                  want_bits[len(prompt) - 1])),
                contracts=contracts, reasons=reasons)
    if cell.mismatched_logits:
        cell.status = "tolerance"
    if not math.isfinite(cell.max_abs_diff):
        cell.status, cell.error = "failed", "non-finite logits"
    return cell


def run_matrix(fixtures: dict[str, Any], *, work: Path, options: Any = None, threads: int = 1,
               archs: list[str] | None = None, presets: list[str] | None = None) -> list[Cell]:
    """Every cell, rows in the manifest's order, columns in matrix.json's preset order."""
    cells = []
    for arch in archs or list(fixtures["models"]):
        for preset in presets or matrix_spec()["presets"]:
            cells.append(run_cell(fixtures, arch, preset, work=work, options=options, threads=threads))
    return cells


def markdown_table(cells: list[Cell]) -> str:
    """Rows = architectures, columns = presets; each cell bit-exact, tolerance X (why) or refused: reason."""
    presets = [p for p in matrix_spec()["presets"] if any(c.preset == p for c in cells)]
    archs = list(dict.fromkeys(c.arch for c in cells))
    by = {(c.arch, c.preset): c for c in cells}
    lines = ["| architecture | " + " | ".join(presets) + " |", "|---|" + "---|" * len(presets)]
    for arch in archs:
        row = [by[(arch, p)].text().replace("|", "/") if (arch, p) in by else "" for p in presets]
        lines.append(f"| {arch} | " + " | ".join(row) + " |")
    return "\n".join(lines)
