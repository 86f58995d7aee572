"""Audit and ratchet tests: map classes, the AST scans of compiler code, and baseline floors/ceilings."""

import json
import textwrap

import pytest
from mapgen import make_map, write_maps

from kernelmap.cli import main
from kernelmap.errors import MapError
from kernelmap.maps import load_registry
from kernelmap.maps.audit import (
    BASELINE_PATH,
    audit,
    check_baseline,
    load_baseline,
    scan_model_literals,
    scan_op_conditionals,
    write_baseline,
)


def _project(tmp_path, maps, *, test_text="", define=True):
    mdir, kdir = write_maps(tmp_path, maps)
    if not define:
        for src in kdir.rglob("*.c"):
            src.write_text("/* nothing */\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_k.py").write_text(test_text)
    src = tmp_path / "src" / "kernelmap"
    src.mkdir(parents=True)
    (src / "ok.py").write_text('"""Docstring may say gemma."""\nX = "fine"\n')
    return load_registry([mdir], builtin=False, kernel_root=kdir), kdir, src


def test_audit_classifies_hardened_production_map(tmp_path):
    m = make_map("lin_a", tests=("tests/test_k.py::test_lin_a",))
    reg, kdir, src = _project(tmp_path, [m], test_text="def test_lin_a():\n    'lin_a'\n")
    report = audit(reg, kernel_root=kdir, project_root=tmp_path, src_root=src)
    assert report["maps"]["lin_a"] == ["selection_managed", "interface_ready", "abi_crossvalidated",
                                       "reference_backed", "production", "hardened"]
    assert report["counts"]["hardened"] == 1 and report["counts"]["model_family_literals"] == 0


@pytest.mark.parametrize(("change", "missing"), [
    ("no_test_mention", {"reference_backed", "hardened"}),
    ("test_function_absent", {"hardened"}),
    ("symbols_undefined", {"reference_backed", "hardened"}),
    ("wrong_interface", {"interface_ready", "abi_crossvalidated", "hardened"}),
    ("abi_order", {"abi_crossvalidated", "hardened"}),
])
def test_audit_class_lost_when_evidence_missing(tmp_path, change, missing):
    m = make_map("lin_a", tests=("tests/test_k.py::test_lin_a",))
    text = "def test_lin_a():\n    'lin_a'\n"
    if change == "no_test_mention":
        m["tests"] = ["tests/test_k.py::test_x"]
        text = "def test_x():\n    pass\n"
    if change == "test_function_absent":
        text = "def test_other():\n    'lin_a'\n"
    if change == "wrong_interface":
        m["interface"] = "residual_add.v1"
    if change == "abi_order":
        params = m["call_abi"]["params"]
        params[1], params[2] = params[2], params[1]
    reg, kdir, src = _project(tmp_path, [m], test_text=text, define=change != "symbols_undefined")
    classes = set(audit(reg, kernel_root=kdir, project_root=tmp_path, src_root=src)["maps"]["lin_a"])
    full = {"selection_managed", "interface_ready", "abi_crossvalidated", "reference_backed", "production",
            "hardened"}
    assert classes == full - missing


def test_audit_candidate_and_deprecated_classes(tmp_path):
    reg, kdir, src = _project(tmp_path, [make_map("lin_a", status="candidate"),
                                         make_map("lin_b", status="deprecated", priority=7)])
    counts = audit(reg, kernel_root=kdir, project_root=tmp_path, src_root=src)["counts"]
    assert (counts["candidate_or_diagnostic"], counts["deprecated"], counts["production"]) == (1, 1, 0)


def test_scan_model_literals_finds_words_not_docstrings_or_peer_names(tmp_path):
    src = tmp_path / "kernelmap"
    src.mkdir()
    (src / "m.py").write_text(textwrap.dedent('''
        """Module docstring naming Gemma is fine."""
        def f(arch):
            """So is a function docstring about llama."""
            if arch == "Gemma3":
                return "qwen2-style"
            note = f"compare with llama.cpp using the llama-cpu policy"
            return note
    '''))
    found = scan_model_literals(src, ["gemma", "llama", "qwen"], ["llama.cpp", "llama-cpu"])
    assert [(f["line"], f["words"]) for f in found] == [(5, ["gemma"]), (6, ["qwen"])]


def test_scan_op_conditionals_counts_op_name_comparisons_only(tmp_path):
    d = tmp_path / "kernelmap" / "plan"
    d.mkdir(parents=True)
    (d / "p.py").write_text(textwrap.dedent('''
        def f(op, kind):
            if op == "rope":
                pass
            if op in ("linear", "other"):
                pass
            if kind == "dim":
                pass
    '''))
    found = scan_op_conditionals([d], frozenset({"rope", "linear"}))
    assert [f["line"] for f in found] == [3, 5]


def _report(**counts):
    base = {"selection_managed": 5, "interface_ready": 5, "abi_crossvalidated": 5, "reference_backed": 5,
            "hardened": 5, "production": 5, "model_family_literals": 0, "op_name_conditionals": 2}
    base.update(counts)
    return {"counts": base, "model_family_literals": [{"file": "kernelmap/x.py", "line": 3}],
            "op_name_conditionals": []}


def test_check_baseline_names_each_regression():
    baseline = {"floors": {"hardened": 5, "production": 4}, "ceilings": {"model_family_literals": 0,
                                                                          "op_name_conditionals": 2}}
    assert check_baseline(_report(), baseline) == []
    problems = check_baseline(_report(hardened=4, model_family_literals=1), baseline)
    assert problems == ["hardened regressed: 4 < floor 5",
                        "model_family_literals increased: 1 > ceiling 0 (kernelmap/x.py:3)"]


def test_write_baseline_only_raises_floors_and_lowers_ceilings(tmp_path):
    path = tmp_path / "b.json"
    base = {"schema": "kernelmap.audit_baseline/1", "model_families": ["gemma"], "allowed_phrases": [],
            "floors": {"hardened": 9}, "ceilings": {"model_family_literals": 0, "op_name_conditionals": 1}}
    path.write_text(json.dumps(base))
    new = write_baseline(_report(hardened=3, op_name_conditionals=4), load_baseline(path), path)
    assert new["floors"]["hardened"] == 9 and new["floors"]["production"] == 5
    assert new["ceilings"] == {"model_family_literals": 0, "op_name_conditionals": 1}
    assert load_baseline(path)["floors"]["production"] == 5
    new = write_baseline(_report(op_name_conditionals=0), load_baseline(path), path)
    assert new["ceilings"]["op_name_conditionals"] == 0


@pytest.mark.parametrize(("doc", "pointer"), [
    ({"floors": {"hardend": 1}}, "/floors/hardend"),
    ({"floors": {"hardened": -1}}, "/floors/hardened"),
    ({"ceilings": {"model_family_literals": 2}}, "/ceilings/model_family_literals"),
    ({"extra": 1}, "/extra"),
    ({"schema": "x"}, "/schema"),
])
def test_load_baseline_malformed_names_pointer(tmp_path, doc, pointer):
    base = {"schema": "kernelmap.audit_baseline/1", "model_families": ["gemma"], "floors": {},
            "ceilings": {"model_family_literals": 0}}
    base.update(doc)
    path = tmp_path / "b.json"
    path.write_text(json.dumps(base))
    with pytest.raises(MapError) as exc:
        load_baseline(path)
    assert exc.value.pointer == pointer


def test_cli_audit_check_regression_exits_1_naming_it(tmp_path, capsys):
    base = json.loads(BASELINE_PATH.read_text())
    base["floors"]["selection_managed"] = 100000
    path = tmp_path / "b.json"
    path.write_text(json.dumps(base))
    assert main(["maps", "audit", "--check", "--baseline", str(path)]) == 1
    err = capsys.readouterr().err
    assert "selection_managed regressed" in err and "Traceback" not in err
    assert json.loads(path.read_text()) == base  # --check writes nothing


def test_cli_audit_json_reports_every_class(capsys):
    assert main(["maps", "audit", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["schema"] == "kernelmap.audit_report/1"
    assert set(report["counts"]) >= {"selection_managed", "hardened", "model_family_literals"}
