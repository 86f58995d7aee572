"""Map stage side system: the audit and migration ratchet over the kernel maps and the compiler's own code.

Input: a Registry, the interfaces (circuits/interfaces.json) and their C argument order
(circuits/interfaces.json), the C sources (read by the C compiler: maps/cdefs.py), tests/ and the
Python under src/kernelmap. Output: a report (classes per map, counts, AST findings, C definitions
that disagree with a map's call_abi, exported helpers named like kernels) and a check against
audit_baseline.json, whose floors may only rise and ceilings only fall, compared also with the
baseline at the git merge base so a loosening is refused unless the file gives its reason. It does
not fix anything.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import tempfile
from collections.abc import Iterable, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from kernelmap.build.probe import KERNEL_SYMBOL  # km_<map id>__<variant>; a helper must not match
from kernelmap.errors import MapError
from kernelmap.maps.cdefs import SourceDefs, c_type, definitions
from kernelmap.maps.loader import parse_json
from kernelmap.maps.provider import Provider
from kernelmap.maps.registry import KERNEL_ROOT, Registry

__all__ = ["BASELINE_PATH", "CLASSES", "abi_problems", "audit", "baseline_at_merge_base", "baseline_edits",
           "check_baseline", "check_baseline_doc", "check_baseline_edits", "describe_edit", "load_baseline",
           "unowned_kernel_symbols", "write_baseline"]

PACKAGE_ROOT = Path(__file__).resolve().parent.parent
PROJECT_ROOT = PACKAGE_ROOT.parent.parent
BASELINE_PATH = Path(__file__).resolve().parent / "audit_baseline.json"
REPORT_SCHEMA = "kernelmap.audit_report/1"
BASELINE_SCHEMA = "kernelmap.audit_baseline/1"

CLASSES = ("selection_managed", "interface_ready", "abi_crossvalidated", "reference_backed", "hardened",
           "production", "candidate_or_diagnostic", "deprecated")
FLOOR_KEYS = ("selection_managed", "interface_ready", "abi_crossvalidated", "reference_backed", "hardened",
              "production")
CEILING_KEYS = ("model_family_literals", "op_name_conditionals", "abi_mismatches", "unowned_kernel_symbols")
# Ceilings that are zero by rule: the baseline may not raise them at all.
ZERO_CEILINGS = ("model_family_literals", "abi_mismatches", "unowned_kernel_symbols")
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


def _units(p: Provider, kernel_root: Path) -> list[tuple[Path, tuple[str, ...]]]:
    return [(kernel_root / v.source, tuple(v.cflags)) for v in p.variants]


def _decl(ctype: str, name: str) -> str:
    return f"{ctype}{'' if ctype.endswith('*') else ' '}{name}"


def abi_problems(p: Provider, kernel_root: Path, defs: dict[tuple[Path, tuple[str, ...]], SourceDefs]) -> list[str]:
    """Where the C definitions of `p`'s variants disagree with its call_abi, one line each (empty when
    every variant's symbol is defined, returns void, and takes exactly the call_abi's parameters in
    order, each with the map's name and the C type the code generator declares for it)."""
    from kernelmap.codegen.bind import c_type_of
    from kernelmap.errors import PlanError

    want: list[tuple[str, str, str]] = []
    for cp in p.raw["call_abi"]["params"]:
        try:
            want.append((cp["name"], c_type(c_type_of(cp, p.raw)), cp["source"]))
        except PlanError as exc:
            return [f"call_abi parameter {cp['name']}: {exc.message} ({cp.get('cast')})"]
    out = []
    for v, unit in zip(p.variants, _units(p, kernel_root), strict=True):
        sd = defs[unit]
        where = v.source
        if sd.error:
            out.append(f"{v.name}: cannot read the C definitions of {where}: {sd.error}")
            continue
        fn = sd.functions.get(v.symbol)
        if fn is None:
            out.append(f"{v.name}: {where} does not define {v.symbol} (an external function)")
            continue
        where = f"{v.source}:{fn.line}"
        if fn.ret != "void":
            out.append(f"{v.name}: {v.symbol} returns {fn.ret} in {where}; kernels return void")
            continue
        got = [(q.name, q.type) for q in fn.params]
        if len(got) != len(want):
            out.append(f"{v.name}: {v.symbol} takes {len(got)} parameters in {where}; call_abi binds {len(want)}")
            continue
        for i, ((gname, gtype), (wname, wtype, source)) in enumerate(zip(got, want, strict=True)):
            if gname != wname or gtype != wtype:
                out.append(f"{v.name}: parameter {i + 1} of {v.symbol} is `{_decl(gtype, gname)}` in {where}; "
                           f"call_abi binds `{_decl(wtype, wname)}` ({source})")
                break
    return out


def classify(p: Provider, kernel_root: Path, tests_text: str, root: Path,
             catalogue: dict[str, dict[str, Any]],
             defs: dict[tuple[Path, tuple[str, ...]], SourceDefs] | None = None) -> list[str]:
    """The audit classes of one provider. `defs` (what the C sources define, from cdefs.definitions)
    is read for `p`'s variants when not given."""
    if defs is None:
        defs = definitions(_units(p, kernel_root), kernel_root)
    out = ["selection_managed"]  # every loaded map passed the schema's selection block
    ready = _interface_ready(p, catalogue.get(p.interface))
    if ready:
        out.append("interface_ready")
    crossed = (ready and [c.name for c in p.call_abi] == interface_abi().get(p.interface)
               and not abi_problems(p, kernel_root, defs))
    if crossed:
        out.append("abi_crossvalidated")
    defined = {v.name: v.symbol in defs[unit].functions for v, unit in zip(p.variants, _units(p, kernel_root),
                                                                           strict=True)}
    mentioned = re.search(r"\b(" + re.escape(p.id) + "|" + re.escape(p.reference) + r")\b", tests_text) is not None
    backed = defined.get("ref", False) and mentioned
    if backed:
        out.append("reference_backed")
    all_defined = all(defined.values())
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


def unowned_kernel_symbols(registry: Registry, kernel_root: Path,
                           defs: dict[tuple[Path, tuple[str, ...]], SourceDefs]) -> list[dict[str, Any]]:
    """External functions of the C sources named like a kernel (km_<id>__<variant>) that no map variant
    owns: a helper or a stray kernel the boot check would take for one. With file and line."""
    owned = {v.symbol for p in registry.providers.values() for v in p.variants}
    used = {kernel_root / v.source for p in registry.providers.values() for v in p.variants}
    found: dict[tuple[str, str], dict[str, Any]] = {}
    for (source, _flags), sd in sorted(defs.items(), key=lambda kv: (str(kv[0][0]), kv[0][1])):
        rel = source.relative_to(kernel_root).as_posix() if source.is_relative_to(kernel_root) else str(source)
        if sd.error and source not in used:  # a map's unreadable source is an abi mismatch of that map
            found.setdefault((rel, ""), {"file": rel, "line": 0, "symbol": f"(unreadable: {sd.error})"})
        for name, fn in sd.functions.items():
            if KERNEL_SYMBOL.match(name) and name not in owned:
                found.setdefault((rel, name), {"file": rel, "line": fn.line, "symbol": name})
    return [found[k] for k in sorted(found)]


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


def _const_text(node: ast.AST) -> str | None:
    if isinstance(node, ast.Constant):
        if isinstance(node.value, str):
            return node.value
        if isinstance(node.value, bytes):
            return node.value.decode("latin-1")
    return None


def _static_text(node: ast.AST) -> str | None:
    """The text a string expression built only from constants evaluates to: `"gem" + "ma"`,
    `"".join(["gem", "ma"])`, `"%s%s" % ("gem", "ma")`, `"{}{}".format(...)`, f-strings (a formatted
    value that is not constant counts as a word break). None when the expression is not of that kind."""
    text = _const_text(node)
    if text is not None:
        return text
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _static_text(node.left), _static_text(node.right)
        return left + right if left is not None and right is not None else None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
        fmt = _static_text(node.left)
        args = (_static_seq(node.right) if isinstance(node.right, (ast.Tuple, ast.List))
                else [_static_text(node.right)])
        if fmt is None or args is None or any(a is None for a in args):
            return None
        try:
            return fmt % tuple(args)
        except (TypeError, ValueError, KeyError):
            return None
    if isinstance(node, ast.JoinedStr):
        parts = []
        for v in node.values:
            inner = _static_text(v.value) if isinstance(v, ast.FormattedValue) else _const_text(v)
            parts.append(inner if inner is not None else " ")
        return "".join(parts)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and not node.keywords:
        base = _static_text(node.func.value)
        if base is None:
            return None
        if node.func.attr == "join" and len(node.args) == 1:
            items = _static_seq(node.args[0])
            return base.join(items) if items is not None else None
        if node.func.attr == "format":
            args = [_static_text(a) for a in node.args]
            if any(a is None for a in args):
                return None
            try:
                return base.format(*args)
            except (IndexError, KeyError, ValueError, AttributeError):
                return None
    return None


def _static_seq(node: ast.AST) -> list[str] | None:
    if not isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return None
    items = [_static_text(e) for e in node.elts]
    return None if any(i is None for i in items) else items  # type: ignore[return-value]


def _leaf_texts(node: ast.AST) -> list[str]:
    return [t for n in ast.walk(node) if (t := _const_text(n)) is not None]


def _family_words(texts: Iterable[str], fam: set[str], allowed: Sequence[str]) -> set[str]:
    words: set[str] = set()
    for text in texts:
        text = text.lower()
        for phrase in allowed:
            text = text.replace(phrase.lower(), " ")
        words |= set(re.findall(r"[a-z]+", text)) & fam
    return words


def _scan_node(node: ast.AST, docs: set[int], fam: set[str], allowed: Sequence[str],
               hits: list[tuple[int, str, set[str]]]) -> None:
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        names = [a.name for a in node.names] + [a.asname for a in node.names if a.asname]
        if isinstance(node, ast.ImportFrom) and node.module:
            names.append(node.module)
        words = _family_words(names, fam, allowed)
        if words:
            hits.append((node.lineno, "import", words))
        return
    if id(node) in docs:
        return
    text = _static_text(node)
    if text is not None:
        words = _family_words([text, *_leaf_texts(node)], fam, allowed)
        if words:
            hits.append((node.lineno, "literal" if isinstance(node, ast.Constant) else "assembled", words))
        return  # the parts of an assembled string are counted with it, once
    for child in ast.iter_child_nodes(node):
        _scan_node(child, docs, fam, allowed, hits)


def scan_model_literals(src_root: Path, families: Sequence[str], allowed: Sequence[str]) -> list[dict[str, Any]]:
    """Model-family words in the compiler's Python, with file and line: in string constants (not
    docstrings), in strings assembled from constants (`"gem" + "ma"`, joins, formats, f-strings), and in
    the module names of imports (`import <family>_weights`, `from <family>.x import y`)."""
    fam = {f.lower() for f in families}
    found = []
    for path in _py_files(src_root):
        try:
            tree = ast.parse(_text(path), filename=str(path))
        except SyntaxError as exc:
            raise MapError(f"cannot parse Python for the audit: {exc.msg}", path=path,
                           pointer=f"line {exc.lineno}") from None
        hits: list[tuple[int, str, set[str]]] = []
        _scan_node(tree, _docstring_nodes(tree), fam, allowed, hits)
        for line, kind, words in sorted(hits, key=lambda h: (h[0], h[1])):
            found.append({"file": _rel(path), "line": line, "kind": kind, "words": sorted(words)})
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
    """Classify every map and scan the compiler's Python and C sources; return the report (deterministic)."""
    baseline = baseline if baseline is not None else load_baseline()
    tests_root = project_root / "tests"
    tests_text = "\n".join(_text(p) for p in _py_files(tests_root)) if tests_root.is_dir() else ""
    classes: dict[str, list[str]] = {c: [] for c in CLASSES}
    per_map: dict[str, list[str]] = {}
    catalogue = interfaces()
    units = [u for p in registry.providers.values() for u in _units(p, kernel_root)]
    used = {u[0] for u in units}
    units += [(src, ()) for src in sorted(kernel_root.rglob("*.c")) if src not in used]  # e.g. the runtime
    defs = definitions(units, kernel_root)
    mismatches = []
    for pid, p in registry.providers.items():
        cls = classify(p, kernel_root, tests_text, project_root, catalogue, defs)
        per_map[pid] = cls
        for c in cls:
            classes[c].append(pid)
        mismatches += [{"map": pid, "problem": m} for m in abi_problems(p, kernel_root, defs)]
    literals = scan_model_literals(src_root, baseline["model_families"], baseline.get("allowed_phrases", []))
    ops = frozenset(registry.ops) | {spec["op"] for spec in catalogue.values()} | {"logits"}
    conds = scan_op_conditionals([src_root / d for d in CONDITIONAL_DIRS], ops)
    unowned = unowned_kernel_symbols(registry, kernel_root, defs)
    counts = {c: len(classes[c]) for c in CLASSES}
    counts["maps"] = len(registry.providers)
    counts["model_family_literals"] = len(literals)
    counts["op_name_conditionals"] = len(conds)
    counts["abi_mismatches"] = len(mismatches)
    counts["unowned_kernel_symbols"] = len(unowned)
    return {"schema": REPORT_SCHEMA, "registry_hash": registry.hash, "counts": counts, "classes": classes,
            "maps": per_map, "model_family_literals": literals, "op_name_conditionals": conds,
            "abi_mismatches": mismatches, "unowned_kernel_symbols": unowned}


def load_baseline(path: Path = BASELINE_PATH) -> dict[str, Any]:
    """Read and check the baseline file (every floor and ceiling, model families, allowed phrases, and
    the reasons given for loosenings)."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise MapError(f"cannot read audit baseline: {exc.strerror}", path=path) from None
    return check_baseline_doc(parse_json(data, path), path)


def check_baseline_doc(doc: Any, path: Path | str) -> dict[str, Any]:
    """Validate a parsed baseline (the file, or its version at the merge base); MapError naming the field."""
    if not isinstance(doc, dict) or doc.get("schema") != BASELINE_SCHEMA:
        raise MapError("not an audit baseline", path=path, pointer="/schema", expected=BASELINE_SCHEMA)
    allowed = {"schema", "description", "model_families", "allowed_phrases", "floors", "ceilings", "loosened"}
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
        missing = [n for n in names if n not in table]
        if missing:  # a dropped floor or ceiling would silently stop being checked
            raise MapError(f"missing {key[:-1]} \"{missing[0]}\"", path=path, pointer=f"/{key}/{missing[0]}",
                           hint="`kernelmap maps audit --write-baseline` writes every floor and ceiling")
    fams = doc.get("model_families")
    if not isinstance(fams, list) or not fams or not all(isinstance(f, str) and f.isalpha() for f in fams):
        raise MapError("model_families must be a non-empty list of words", path=path, pointer="/model_families")
    phrases = doc.get("allowed_phrases", [])
    if not isinstance(phrases, list) or not all(isinstance(f, str) and f for f in phrases):
        raise MapError("allowed_phrases must be a list of strings", path=path, pointer="/allowed_phrases")
    for name in ZERO_CEILINGS:
        if doc["ceilings"][name] != 0:
            raise MapError(f"the {name} ceiling is zero", path=path, pointer=f"/ceilings/{name}",
                           value=doc["ceilings"][name], expected=0)
    loosened = doc.get("loosened", [])
    if not isinstance(loosened, list):
        raise MapError("loosened must be a list", path=path, pointer="/loosened")
    for i, entry in enumerate(loosened):
        if (not isinstance(entry, dict) or set(entry) != {"key", "to", "reason"}
                or not isinstance(entry["key"], str) or not isinstance(entry["reason"], str)
                or not entry["reason"].strip()):
            raise MapError("a loosened entry is {key, to, reason} with a non-empty reason", path=path,
                           pointer=f"/loosened/{i}", value=entry)
    return doc


def _where(finding: dict[str, Any]) -> str:
    if "map" in finding:
        return f"{finding['map']}: {finding['problem']}"
    if "symbol" in finding:
        return f"{finding['file']}:{finding['line']} {finding['symbol']}"
    return f"{finding['file']}:{finding['line']}"


def check_baseline(report: dict[str, Any], baseline: dict[str, Any]) -> list[str]:
    """Regressions of `report` against `baseline`, one message each (empty when the ratchet holds)."""
    counts = report["counts"]
    out = []
    for name, floor in sorted(baseline["floors"].items()):  # load_baseline requires every key
        if counts[name] < floor:
            out.append(f"{name} regressed: {counts[name]} < floor {floor}")
    for name, ceiling in sorted(baseline["ceilings"].items()):
        if counts[name] > ceiling:
            where = "; ".join(_where(f) for f in report.get(name, [])[:5])
            out.append(f"{name} increased: {counts[name]} > ceiling {ceiling}" + (f" ({where})" if where else ""))
    return out


def baseline_edits(old: dict[str, Any], new: dict[str, Any]) -> list[dict[str, Any]]:
    """How `new` differs from `old` where it matters: each floor and ceiling that moved, each model-family
    word removed or added, each allowed phrase added or removed. `loosens` is True for a floor lowered,
    a ceiling raised, a family word removed or an allowed phrase added (what lets more through)."""
    out: list[dict[str, Any]] = []
    for table, names, looser in (("floors", FLOOR_KEYS, lambda a, b: b < a),
                                 ("ceilings", CEILING_KEYS, lambda a, b: b > a)):
        for name in names:
            a, b = old.get(table, {}).get(name), new[table][name]
            if a == b:
                continue
            out.append({"key": f"{table}.{name}", "from": a, "to": b, "loosens": a is not None and looser(a, b)})
    for table, loosening_when in (("model_families", "removed"), ("allowed_phrases", "added")):
        a, b = set(old.get(table, [])), set(new.get(table, []))
        for word in sorted(a - b):
            out.append({"key": f"{table}", "from": word, "to": None, "loosens": loosening_when == "removed"})
        for word in sorted(b - a):
            out.append({"key": f"{table}", "from": None, "to": word, "loosens": loosening_when == "added"})
    return out


def describe_edit(e: dict[str, Any]) -> str:
    if e["key"] in ("model_families", "allowed_phrases"):
        what = f"{e['key']}: removed \"{e['from']}\"" if e["to"] is None else f"{e['key']}: added \"{e['to']}\""
    elif e["from"] is None:
        what = f"{e['key']} added at {e['to']}"
    else:
        what = f"{e['key']} {e['from']} -> {e['to']}"
    return what + (" (loosens)" if e["loosens"] else " (tightens)")


def check_baseline_edits(edits: Sequence[dict[str, Any]], baseline: dict[str, Any], since: str) -> list[str]:
    """Loosenings since the merge base that the baseline's `loosened` list does not give a reason for."""
    reasons = {(e["key"], json.dumps(e["to"])) for e in baseline.get("loosened", [])}
    out = []
    for e in edits:
        if e["loosens"] and (e["key"], json.dumps(e["to"])) not in reasons:
            out.append(f"{describe_edit(e)} since {since} with no reason: add {{\"key\": \"{e['key']}\", "
                       f"\"to\": {json.dumps(e['to'])}, \"reason\": \"...\"}} to \"loosened\"")
    return out


def _git(args: Sequence[str], cwd: Path) -> str | None:
    try:
        proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout if proc.returncode == 0 else None


def baseline_at_merge_base(path: Path = BASELINE_PATH, base_ref: str = "main") -> tuple[dict[str, Any] | None, str]:
    """The baseline file as it was at the merge base of HEAD and `base_ref` (or origin/<base_ref>), and a
    one-line description of what it was compared with. None, with the reason, when `path` is not in a git
    checkout, no merge base exists, or the file did not exist there (then nothing can be compared)."""
    path = Path(path).resolve()
    top = _git(["rev-parse", "--show-toplevel"], path.parent)
    if top is None:
        return None, f"{path.parent} is not a git checkout: baseline edits not compared with {base_ref}"
    root = Path(top.strip())
    for ref in (base_ref, f"origin/{base_ref}"):
        mb = _git(["merge-base", "HEAD", ref], root)
        if mb is not None:
            break
    else:
        return None, f"no merge base of HEAD and {base_ref}: baseline edits not compared"
    sha = mb.strip()
    rel = path.relative_to(root).as_posix()
    text = _git(["show", f"{sha}:{rel}"], root)
    since = f"the merge base with {ref} ({sha[:10]})"
    if text is None:
        return None, f"{rel} does not exist at {since}: nothing to compare"
    try:
        doc = json.loads(text)
    except ValueError:
        doc = None
    if not isinstance(doc, dict) or not all(isinstance(doc.get(k, {}), dict) for k in ("floors", "ceilings")):
        return None, f"{rel} at {since} is not a baseline: nothing to compare"
    return doc, since


def write_baseline(report: dict[str, Any], baseline: dict[str, Any], path: Path = BASELINE_PATH) -> dict[str, Any]:
    """Ratchet: raise floors to the current counts, lower ceilings to them; never the other way."""
    counts = report["counts"]
    new = dict(baseline)
    new["floors"] = {k: max(baseline["floors"].get(k, 0), counts[k]) for k in FLOOR_KEYS}
    new["ceilings"] = {k: min(baseline["ceilings"].get(k, counts[k]), counts[k]) for k in CEILING_KEYS}
    for name in ZERO_CEILINGS:
        new["ceilings"][name] = 0
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
