"""Every variant of every kernel map is enumerated by a differential test; no test keeps its own variant list.

Differential tests (tests/kernels, tests/fusion) take their variant lists from the registry through
kernel_harness.map_variants / runnable_variants, which record each (map, variant) they hand out. This
module imports every such test module and requires that every (map, variant) the registry declares was
handed out, so a new map without a differential test fails here, and a new variant of a tested map is
parametrized into its tests the day it is added. A static scan refuses hand-written variant lists.
"""

from __future__ import annotations

import ast
import importlib
import sys
from pathlib import Path

from kernel_harness import ENUMERATED, registry

TESTS = Path(__file__).resolve().parent.parent
DIFFERENTIAL_DIRS = (TESTS / "kernels", TESTS / "fusion")

# Test modules owned by another engineer that still keep hand-written variant lists (issue 11 item 6);
# each needs the change made here (parametrize over map_variants, skip through skip_unless_runnable).
# Both lists are strict: once a module is converted, the tests below say to drop its entries.
HAND_KEPT = {
    "test_attention_ggmlfa.py": "attention_f16kv_ggmlfa; owned by the attention work (h3), to be converted",
    "test_geglu.py": "geglu_tanh_f32; owned by the parity-fixture work (h3), to be converted",
}
PENDING_MAPS = {
    "geglu_tanh_f32": "test_geglu.py",
}


def _test_files() -> list[Path]:
    return sorted(p for d in DIFFERENTIAL_DIRS for p in d.glob("test_*.py") if p.name != Path(__file__).name)


def _import_differential_modules() -> None:
    """Import each differential test module (pytest may have already: then its records are in place)."""
    for path in _test_files():
        if str(path.parent) not in sys.path:
            sys.path.insert(0, str(path.parent))
        importlib.import_module(path.stem)


def uncovered(declared: set[tuple[str, str]], enumerated: set[tuple[str, str]], pending: set[str]
              ) -> list[str]:
    """The "map[variant]" pairs declared but neither enumerated nor on the pending list, sorted."""
    return sorted(f"{m}[{v}]" for m, v in declared - enumerated if m not in pending)


def _declared() -> set[tuple[str, str]]:
    return {(pid, v.name) for pid, p in registry().providers.items() for v in p.variants}


def test_every_map_variant_is_enumerated_by_a_differential_test():
    _import_differential_modules()
    missing = uncovered(_declared(), ENUMERATED, set(PENDING_MAPS))
    assert not missing, ("no differential test enumerates these map variants (parametrize a test over "
                         "kernel_harness.map_variants(MAP_ID)): " + ", ".join(missing))
    done = sorted(m for m in PENDING_MAPS if any(pair[0] == m for pair in ENUMERATED))
    assert not done, f"these maps are now enumerated through map_variants: remove them from PENDING_MAPS: {done}"
    unknown = sorted(set(PENDING_MAPS) - {pid for pid, _ in _declared()})
    assert not unknown, f"PENDING_MAPS names maps the registry does not have: {unknown}"


def test_coverage_check_flags_a_map_no_test_enumerates():
    declared = {("a_f32", "ref"), ("a_f32", "avx2"), ("new_map", "ref"), ("new_map", "avx512")}
    enumerated = {("a_f32", "ref"), ("a_f32", "avx2")}
    assert uncovered(declared, enumerated, set()) == ["new_map[avx512]", "new_map[ref]"]
    assert uncovered(declared | {("a_f32", "avx512")}, enumerated, {"new_map"}) == ["a_f32[avx512]"]


def hand_kept_lists(source: str, variant_names: set[str]) -> list[int]:
    """Line numbers of list/tuple literals made only of variant names, at least one of them not "ref"."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.List | ast.Tuple) and node.elts:
            values = [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
            if len(values) == len(node.elts) and set(values) <= variant_names and set(values) - {"ref"}:
                lines.append(node.lineno)
    return sorted(lines)


def _variant_names() -> set[str]:
    return {v for _, v in _declared()}


def test_no_differential_test_keeps_a_hand_written_variant_list():
    names = _variant_names()
    found = {}
    helpers = [TESTS / "kernels" / "kernel_harness.py", TESTS / "kernels" / "linear_ggml_harness.py"]
    for path in [*_test_files(), *helpers]:
        lines = hand_kept_lists(path.read_text(encoding="utf-8"), names)
        if lines:
            found[path.name] = lines
    offenders = {f: lines for f, lines in found.items() if f not in HAND_KEPT}
    assert not offenders, f"hand-written variant lists (use kernel_harness.map_variants): {offenders}"
    converted = sorted(set(HAND_KEPT) - set(found))
    assert not converted, f"these modules no longer keep variant lists: remove them from HAND_KEPT: {converted}"


def test_hand_kept_scan_finds_lists_and_ignores_feature_lists():
    names = {"ref", "avx2", "avx512"}
    src = ('@p("variant", ["avx2", "avx512"])\ndef t(): pass\nfor v in ("ref", "avx2"): pass\n'
           'F = ["avx2", "fma", "f16c"]\nR = ["ref"]\nS = ("x",)\n')
    assert hand_kept_lists(src, names) == [1, 3]
