"""Map stage side system: the audit and migration ratchet over the kernel maps and the compiler's own code.

Input: a Registry, the interfaces (circuits/interfaces.json) and their C argument order
(circuits/interfaces.json), the C sources, tests/ and the Python under src/kernelmap. Output: a report
(classes per map, counts, AST findings) and a check against audit_baseline.json, whose floors may
only rise and ceilings only fall. It does not fix anything.
"""

from __future__ import annotations

import ast
import json
import os
import re
import tempfile
from collections.abc import Iterable, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from kernelmap.errors import MapError
from kernelmap.maps.loader import parse_json
from kernelmap.maps.provider import Provider
from kernelmap.maps.registry import KERNEL_ROOT, Registry

__all__ = ["BASELINE_PATH", "CLASSES", "audit", "check_baseline", "load_baseline", "write_baseline"]

PACKAGE_ROOT = Path(__file__).resolve().parent.parent
PROJECT_ROOT = PACKAGE_ROOT.parent.parent
BASELINE_PATH = Path(__file__).resolve().parent / "audit_baseline.json"
REPORT_SCHEMA = "kernelmap.audit_report/1"
BASELINE_SCHEMA = "kernelmap.audit_baseline/1"

CLASSES = ("selection_managed", "interface_ready", "abi_crossvalidated", "reference_backed", "hardened",
           "production", "candidate_or_diagnostic", "deprecated")
FLOOR_KEYS = ("selection_managed", "interface_ready", "abi_crossvalidated", "reference_backed", "hardened",
              "production")
CEILING_KEYS = ("model_family_literals", "op_name_conditionals")
# Directories whose op-name string comparisons are counted (the resolver and the planner).
CONDITIONAL_DIRS = ("resolve", "plan")


@lru_cache(maxsize=1)
def interface_abi() -> dict[str, list[str]]:
    """Interface id -> the exact C argument order its kernels must take (circuits/interfaces.json)."""
    return {iid: list(spec["abi"]) for iid, spec in interfaces().items() if "abi" in spec}


def interfaces() -> dict[str, dict[str, Any]]:
    """The operation interfaces (ports with roles, params), as the circuits define them."""
    from kernelmap.circuits.loader import load_interfaces

    return load_interfaces().by_id


def _text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def _defines(source: str, symbol: str) -> bool:
    return re.search(r"\b" + re.escape(symbol) + r"\s*\(", source) is not None


def _test_exists(test_id: str, root: Path) -> bool:
    file, _, rest = test_id.partition("::")
    path = root / file
    if not path.is_file():
        return False
    name = rest.split("::")[-1].split("[")[0] if rest else ""
    return not name or re.search(r"\bdef " + re.escape(name) + r"\b", _text(path)) is not None


def _interface_ready(p: Provider, iface: dict[str, Any] | None) -> bool:
    """Same port names with the same roles (state storage counts as role state) and the same params."""
    if iface is None or iface.get("op") != p.op:
        return False
    roles = {n: ("state" if port.storage == "state" else port.role) for n, port in p.ports.items()}
    want = {n: spec["role"] for n, spec in iface["ports"].items()}
    params = {prm.name: prm.type for prm in p.params}
    return roles == want and params == dict(iface.get("params", {}))


def classify(p: Provider, kernel_root: Path, tests_text: str, root: Path,
             catalogue: dict[str, dict[str, Any]]) -> list[str]:
    """The audit classes of one provider."""
    out = ["selection_managed"]  # every loaded map passed the schema's selection block
    ready = _interface_ready(p, catalogue.get(p.interface))
    if ready:
        out.append("interface_ready")
    crossed = ready and [c.name for c in p.call_abi] == interface_abi().get(p.interface)
    if crossed:
        out.append("abi_crossvalidated")
    ref = next((v for v in p.variants if v.name == "ref"), None)
    ref_src = _text(kernel_root / ref.source) if ref else ""
    mentioned = re.search(r"\b(" + re.escape(p.id) + "|" + re.escape(p.reference) + r")\b", tests_text) is not None
    backed = bool(ref_src) and _defines(ref_src, p.reference) and mentioned
    if backed:
        out.append("reference_backed")
    all_defined = all(_defines(_text(kernel_root / v.source), v.symbol) for v in p.variants)
    tests_ok = bool(p.tests) and all(_test_exists(t, root) for t in p.tests)
    if p.status == "production":
        out.append("production")
        if crossed and backed and all_defined and tests_ok:
            out.append("hardened")
    elif p.status in ("candidate", "diagnostic"):
        out.append("candidate_or_diagnostic")
    else:
        out.append("deprecated")
    return out


def _rel(path: Path) -> str:
    try:
        return str(path.relative_to(PACKAGE_ROOT.parent))
    except ValueError:
        return str(path)


def _docstring_nodes(tree: ast.AST) -> set[int]:
    ids: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                ids.add(id(body[0].value))
    return ids


def _py_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.py") if "__pycache__" not in p.parts)


def scan_model_literals(src_root: Path, families: Sequence[str], allowed: Sequence[str]) -> list[dict[str, Any]]:
    """String constants (not docstrings) containing a model-family word, with file and line."""
    fam = {f.lower() for f in families}
    found = []
    for path in _py_files(src_root):
        try:
            tree = ast.parse(_text(path), filename=str(path))
        except SyntaxError as exc:
            raise MapError(f"cannot parse Python for the audit: {exc.msg}", path=path,
                           pointer=f"line {exc.lineno}") from None
        docs = _docstring_nodes(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
                text = node.value.lower()
                for phrase in allowed:
                    text = text.replace(phrase.lower(), " ")
                words = set(re.findall(r"[a-z]+", text)) & fam
                if words:
                    found.append({"file": _rel(path), "line": node.lineno,
                                  "words": sorted(words)})
    return found


def _op_strings(node: ast.AST, ops: frozenset[str]) -> bool:
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str) and node.value in ops
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return any(_op_strings(e, ops) for e in node.elts)
    return False


def scan_op_conditionals(dirs: Iterable[Path], ops: frozenset[str]) -> list[dict[str, Any]]:
    """Comparisons against op-name string constants (`op == "rope"`, `op in ("linear", ...)`)."""
    found = []
    for d in dirs:
        if not d.is_dir():
            continue
        for path in _py_files(d):
            tree = ast.parse(_text(path), filename=str(path))
            for node in ast.walk(tree):
                if (isinstance(node, ast.Compare)
                        and any(_op_strings(x, ops) for x in (node.left, *node.comparators))) or (
                        isinstance(node, ast.MatchValue) and _op_strings(node.value, ops)):
                    found.append({"file": _rel(path), "line": node.lineno})
    return found


def audit(registry: Registry, *, baseline: dict[str, Any] | None = None, kernel_root: Path = KERNEL_ROOT,
          project_root: Path = PROJECT_ROOT, src_root: Path = PACKAGE_ROOT) -> dict[str, Any]:
    """Classify every map and scan the compiler's Python; return the report (deterministic)."""
    baseline = baseline if baseline is not None else load_baseline()
    tests_root = project_root / "tests"
    tests_text = "\n".join(_text(p) for p in _py_files(tests_root)) if tests_root.is_dir() else ""
    classes: dict[str, list[str]] = {c: [] for c in CLASSES}
    per_map: dict[str, list[str]] = {}
    catalogue = interfaces()
    for pid, p in registry.providers.items():
        cls = classify(p, kernel_root, tests_text, project_root, catalogue)
        per_map[pid] = cls
        for c in cls:
            classes[c].append(pid)
    literals = scan_model_literals(src_root, baseline["model_families"], baseline.get("allowed_phrases", []))
    ops = frozenset(registry.ops) | {spec["op"] for spec in catalogue.values()} | {"logits"}
    conds = scan_op_conditionals([src_root / d for d in CONDITIONAL_DIRS], ops)
    counts = {c: len(classes[c]) for c in CLASSES}
    counts["maps"] = len(registry.providers)
    counts["model_family_literals"] = len(literals)
    counts["op_name_conditionals"] = len(conds)
    return {"schema": REPORT_SCHEMA, "registry_hash": registry.hash, "counts": counts, "classes": classes,
            "maps": per_map, "model_family_literals": literals, "op_name_conditionals": conds}


def load_baseline(path: Path = BASELINE_PATH) -> dict[str, Any]:
    """Read and check the baseline file (floors, ceilings, model families, allowed phrases)."""
    try:
        doc = parse_json(path.read_bytes(), path)
    except OSError as exc:
        raise MapError(f"cannot read audit baseline: {exc.strerror}", path=path) from None
    if not isinstance(doc, dict) or doc.get("schema") != BASELINE_SCHEMA:
        raise MapError("not an audit baseline", path=path, pointer="/schema", expected=BASELINE_SCHEMA)
    allowed = {"schema", "description", "model_families", "allowed_phrases", "floors", "ceilings"}
    for key in sorted(doc):
        if key not in allowed:
            raise MapError(f"unknown field \"{key}\"", path=path, pointer=f"/{key}", expected=sorted(allowed))
    for key, names in (("floors", FLOOR_KEYS), ("ceilings", CEILING_KEYS)):
        table = doc.get(key)
        if not isinstance(table, dict):
            raise MapError(f"{key} must be an object", path=path, pointer=f"/{key}")
        for name, value in table.items():
            if name not in names:
                raise MapError(f"unknown {key[:-1]} \"{name}\"", path=path, pointer=f"/{key}/{name}",
                               expected=list(names))
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise MapError("must be a non-negative integer", path=path, pointer=f"/{key}/{name}",
                               value=value)
    fams = doc.get("model_families")
    if not isinstance(fams, list) or not fams or not all(isinstance(f, str) and f.isalpha() for f in fams):
        raise MapError("model_families must be a non-empty list of words", path=path, pointer="/model_families")
    phrases = doc.get("allowed_phrases", [])
    if not isinstance(phrases, list) or not all(isinstance(f, str) and f for f in phrases):
        raise MapError("allowed_phrases must be a list of strings", path=path, pointer="/allowed_phrases")
    if doc["ceilings"].get("model_family_literals", 0) != 0:
        raise MapError("the model-family literal ceiling is zero", path=path,
                       pointer="/ceilings/model_family_literals", value=doc["ceilings"]["model_family_literals"],
                       expected=0)
    return doc


def check_baseline(report: dict[str, Any], baseline: dict[str, Any]) -> list[str]:
    """Regressions of `report` against `baseline`, one message each (empty when the ratchet holds)."""
    counts = report["counts"]
    out = []
    for name, floor in sorted(baseline["floors"].items()):
        if counts[name] < floor:
            out.append(f"{name} regressed: {counts[name]} < floor {floor}")
    for name, ceiling in sorted(baseline["ceilings"].items()):
        if counts[name] > ceiling:
            where = ", ".join(f"{f['file']}:{f['line']}" for f in report[name][:5])
            out.append(f"{name} increased: {counts[name]} > ceiling {ceiling} ({where})")
    return out


def write_baseline(report: dict[str, Any], baseline: dict[str, Any], path: Path = BASELINE_PATH) -> dict[str, Any]:
    """Ratchet: raise floors to the current counts, lower ceilings to them; never the other way."""
    counts = report["counts"]
    new = dict(baseline)
    new["floors"] = {k: max(baseline["floors"].get(k, 0), counts[k]) for k in FLOOR_KEYS}
    new["ceilings"] = {k: min(baseline["ceilings"].get(k, counts[k]), counts[k]) for k in CEILING_KEYS}
    new["ceilings"]["model_family_literals"] = 0
    text = json.dumps(new, indent=2, sort_keys=False) + "\n"
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return new
