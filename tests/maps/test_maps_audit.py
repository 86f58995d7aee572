"""Audit and ratchet tests: map classes, the AST scans of compiler code, and baseline floors/ceilings."""

import json
import textwrap

import pytest
from mapgen import c_definition, make_map, write_maps

from kernelmap.cli import main
from kernelmap.errors import MapError
from kernelmap.maps import load_registry
from kernelmap.maps.audit import (
    BASELINE_PATH,
    FLOOR_KEYS,
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
    ("symbols_undefined", {"reference_backed", "abi_crossvalidated", "hardened"}),
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
            "hardened": 5, "production": 5, "model_family_literals": 0, "op_name_conditionals": 2,
            "abi_mismatches": 0, "unowned_kernel_symbols": 0}
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


def _full_baseline(**tables) -> dict:
    base = json.loads(BASELINE_PATH.read_text())
    base.pop("loosened", None)
    for table, values in tables.items():
        base[table] = {**base[table], **values}
    return base


def test_write_baseline_only_raises_floors_and_lowers_ceilings(tmp_path):
    path = tmp_path / "b.json"
    base = _full_baseline(floors={k: 0 for k in FLOOR_KEYS} | {"hardened": 9},
                          ceilings={"op_name_conditionals": 1})
    path.write_text(json.dumps(base))
    new = write_baseline(_report(hardened=3, op_name_conditionals=4), load_baseline(path), path)
    assert new["floors"]["hardened"] == 9 and new["floors"]["production"] == 5
    assert new["ceilings"] == {"model_family_literals": 0, "op_name_conditionals": 1, "abi_mismatches": 0,
                               "unowned_kernel_symbols": 0}
    assert load_baseline(path)["floors"]["production"] == 5
    new = write_baseline(_report(op_name_conditionals=0), load_baseline(path), path)
    assert new["ceilings"]["op_name_conditionals"] == 0


@pytest.mark.parametrize(("change", "pointer"), [
    ({"floors": {"hardend": 1}}, "/floors/hardend"),
    ({"floors": {"hardened": -1}}, "/floors/hardened"),
    ({"ceilings": {"model_family_literals": 2}}, "/ceilings/model_family_literals"),
    ({"ceilings": {"abi_mismatches": 1}}, "/ceilings/abi_mismatches"),
    ({"ceilings": {"unowned_kernel_symbols": 1}}, "/ceilings/unowned_kernel_symbols"),
    ({"extra": 1}, "/extra"),
    ({"schema": "x"}, "/schema"),
    ({"drop_floor": "hardened"}, "/floors/hardened"),
    ({"loosened": [{"key": "floors.hardened", "to": 1, "reason": " "}]}, "/loosened/0"),
])
def test_load_baseline_malformed_names_pointer(tmp_path, change, pointer):
    base = _full_baseline()
    for key, value in change.items():
        if key == "drop_floor":
            del base["floors"][value]
        elif key in ("floors", "ceilings"):
            base[key].update(value)
        else:
            base[key] = value
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
    # issue 11 item 4: the builtin maps agree with their C definitions and no helper looks like a kernel
    assert report["counts"]["abi_mismatches"] == 0, report["abi_mismatches"]
    assert report["unowned_kernel_symbols"] == [] and report["counts"]["hardened"] == report["counts"]["maps"]


# ---- issue 11 item 4(a): call_abi against the kernels' real C definitions (gcc -aux-info) -----------

@pytest.mark.parametrize(("source", "fragment"), [
    ({"swap": (3, 4)}, "parameter 4 of km_lin_a__ref is `int64_t N` in linear/lin_a_ref.c:2; call_abi binds "
                       "`int64_t M` (dim:M)"),
    ({"retype": {5: "int32_t"}}, "parameter 6 of km_lin_a__ref is `int32_t K`"),
    ({"retype": {0: "double *"}}, "parameter 1 of km_lin_a__ref is `double *y` in linear/lin_a_ref.c:2; call_abi "
                                  "binds `float *y` (output:y)"),
])
def test_audit_c_definition_disagreeing_with_call_abi_is_not_crossvalidated(tmp_path, source, fragment):
    m = make_map("lin_a", tests=("tests/test_k.py::test_lin_a",))
    reg, kdir, src = _project(tmp_path, [m], test_text="def test_lin_a():\n    'lin_a'\n")
    (kdir / "linear" / "lin_a_ref.c").write_text(c_definition(m, "km_lin_a__ref", **source))
    report = audit(reg, kernel_root=kdir, project_root=tmp_path, src_root=src)
    assert "abi_crossvalidated" not in report["maps"]["lin_a"] and "hardened" not in report["maps"]["lin_a"]
    assert [f["map"] for f in report["abi_mismatches"]] == ["lin_a"]
    assert fragment in report["abi_mismatches"][0]["problem"]
    assert report["counts"]["abi_mismatches"] == 1
    base = {"floors": {}, "ceilings": {"abi_mismatches": 0}}
    assert check_baseline(report, base) == [f"abi_mismatches increased: 1 > ceiling 0 (lin_a: "
                                            f"{report['abi_mismatches'][0]['problem']})"]


def test_audit_macro_built_definition_is_read_as_the_compiler_sees_it(tmp_path):
    m = make_map("lin_a", tests=("tests/test_k.py::test_lin_a",))
    reg, kdir, src = _project(tmp_path, [m], test_text="def test_lin_a():\n    'lin_a'\n")
    text = c_definition(m, "km_lin_a__avx2").replace("void km_lin_a__avx2(", "KM_KERNEL(km_lin_a__avx2)(")
    (kdir / "linear" / "lin_a_avx2.c").write_text("#define KM_KERNEL(name) void name\n" + text)
    report = audit(reg, kernel_root=kdir, project_root=tmp_path, src_root=src)
    assert "hardened" in report["maps"]["lin_a"] and report["abi_mismatches"] == []


# ---- issue 11 item 4(e): a helper that no map owns must not be named like a kernel --------------------

def test_audit_exported_helper_named_like_a_kernel_is_counted(tmp_path):
    m = make_map("lin_a", tests=("tests/test_k.py::test_lin_a",))
    reg, kdir, src = _project(tmp_path, [m], test_text="def test_lin_a():\n    'lin_a'\n")
    ref = kdir / "linear" / "lin_a_ref.c"
    ref.write_text(ref.read_text() + "int km_lin_a__avx2_check(int n) { return n; }\n"
                   "static int km_lin_a__private(int n) { return n; }\nint km_lin_a_probe(int n) { return n; }\n")
    (kdir / "linear" / "stray.c").write_text("void km_nobody__ref(void) {}\n")  # in no map's sources
    report = audit(reg, kernel_root=kdir, project_root=tmp_path, src_root=src)
    assert report["unowned_kernel_symbols"] == [
        {"file": "linear/lin_a_ref.c", "line": 3, "symbol": "km_lin_a__avx2_check"},
        {"file": "linear/stray.c", "line": 1, "symbol": "km_nobody__ref"}]
    assert report["counts"]["unowned_kernel_symbols"] == 2
    assert "hardened" in report["maps"]["lin_a"]  # the map itself is fine; the helper is the finding


# ---- issue 11 item 4(b): the baseline may not be loosened silently ------------------------------------

def _git(repo, *args):
    import subprocess

    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", "-c", "init.defaultBranch=main",
                    *args], cwd=repo, check=True, capture_output=True)


def _repo_with_baseline(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    path = repo / "audit_baseline.json"
    path.write_text(BASELINE_PATH.read_text())
    _git(repo, "add", "audit_baseline.json")
    _git(repo, "commit", "-q", "-m", "baseline")
    _git(repo, "checkout", "-q", "-b", "feature")
    return path


def test_baseline_edits_since_merge_base_list_loosenings(tmp_path):
    from kernelmap.maps.audit import baseline_at_merge_base, baseline_edits, check_baseline_edits

    path = _repo_with_baseline(tmp_path)
    doc = json.loads(path.read_text())
    doc["floors"]["hardened"] -= 1
    doc["floors"]["production"] += 1
    doc["model_families"].remove("qwen")
    doc["allowed_phrases"].append("gemma-cpp")
    path.write_text(json.dumps(doc))
    old, since = baseline_at_merge_base(path)
    assert old is not None and since.startswith("the merge base with main (")
    edits = baseline_edits(old, doc)
    n, prod = doc["floors"]["hardened"], doc["floors"]["production"]
    assert [(e["key"], e["from"], e["to"], e["loosens"]) for e in edits] == [
        ("floors.hardened", n + 1, n, True), ("floors.production", prod - 1, prod, False),
        ("model_families", "qwen", None, True), ("allowed_phrases", None, "gemma-cpp", True)]
    problems = check_baseline_edits(edits, doc, since)
    assert len(problems) == 3 and problems[0].startswith(f"floors.hardened {n + 1} -> {n} (loosens) since the merge")
    doc["loosened"] = [{"key": "floors.hardened", "to": n, "reason": "a map moved to candidate"}]
    assert len(check_baseline_edits(edits, doc, since)) == 2


def test_cli_audit_check_refuses_a_lowered_floor_without_a_reason(tmp_path, capsys):
    path = _repo_with_baseline(tmp_path)
    doc = json.loads(path.read_text())
    was = doc["floors"]["hardened"]  # the committed floor (the merge base's unless this branch raised it)
    doc["floors"]["hardened"] = was - 1  # still below the count, so only the history can catch it
    path.write_text(json.dumps(doc, indent=2))
    assert main(["maps", "audit", "--check", "--baseline", str(path)]) == 1
    err = capsys.readouterr().err
    assert f"floors.hardened {was} -> {was - 1} (loosens) since the merge base with main" in err and "Traceback" not in err
    doc["loosened"] = [{"key": "floors.hardened", "to": was - 1, "reason": "one map is being rewritten"}]
    path.write_text(json.dumps(doc, indent=2))
    assert main(["maps", "audit", "--check", "--baseline", str(path)]) == 0
    err = capsys.readouterr().err
    assert "baseline vs the merge base with main" in err and f"floors.hardened {was} -> {was - 1} (loosens)" in err
    assert f"baseline loosened: floors.hardened -> {was - 1}: one map is being rewritten" in err


def test_cli_audit_outside_git_says_history_was_not_compared(tmp_path, capsys):
    path = tmp_path / "b.json"
    path.write_text(BASELINE_PATH.read_text())
    assert main(["maps", "audit", "--check", "--baseline", str(path)]) == 0
    assert "is not a git checkout: baseline edits not compared with main" in capsys.readouterr().err


# ---- issue 11 item 4(c): maps validate FILES... is one registry with the builtin maps ---------------

def test_cli_validate_files_finds_a_tie_with_a_builtin_map(tmp_path, capsys):
    from kernelmap.maps.registry import MAPS_DIR

    doc = json.loads((MAPS_DIR / "embedding_q8_0.json").read_text())
    doc["id"] = "embedding_q8_0_copy"
    doc["numerics"]["reference"] = "km_embedding_q8_0_copy__ref"
    for v in doc["variants"]:
        v["symbol"] = f"km_embedding_q8_0_copy__{v['name']}"
    path = tmp_path / "embedding_q8_0_copy.json"
    path.write_text(json.dumps(doc))
    assert main(["maps", "validate", str(path)]) == 1
    err = capsys.readouterr().err
    assert "production providers \"embedding_q8_0\" and \"embedding_q8_0_copy\" tie at priority 100" in err
    assert main(["maps", "validate", "--no-builtin", str(path)]) == 0
    assert "registry of 1 maps (without the builtin maps)" in capsys.readouterr().out
    assert main(["maps", "validate", str(MAPS_DIR / "embedding_q8_0.json")]) == 0  # a builtin file: loaded once


# ---- issue 11 item 4(d): imports and assembled strings are scanned; the default model is data --------

def test_scan_model_literals_finds_imports_and_assembled_strings(tmp_path):
    src = tmp_path / "kernelmap"
    src.mkdir()
    (src / "m.py").write_text(textwrap.dedent('''
        import gemma3_270m_weights
        from qwen.tools import load as _load
        import json as gemma_json
        A = "gem" + "ma"
        B = "".join(["ll", "ama"])
        C = "%s%s" % ("qw", "en")
        D = f"{'gem'}ma3"
        E = "{}{}".format("gem", "ma")
        F = "ge" + "m" + str(3)
        G = "llama.cpp" + " is the peer"
    '''))
    found = scan_model_literals(src, ["gemma", "llama", "qwen"], ["llama.cpp"])
    assert [(f["line"], f["kind"], f["words"]) for f in found] == [
        (2, "import", ["gemma"]), (3, "import", ["qwen"]), (4, "import", ["gemma"]), (5, "assembled", ["gemma"]),
        (6, "assembled", ["llama"]), (7, "assembled", ["qwen"]), (8, "assembled", ["gemma"]),
        (9, "assembled", ["gemma"])]


def test_tokenize_default_model_comes_from_default_model_json(tmp_path, monkeypatch, capsys):
    from synth_model import write_synth_model

    gguf = write_synth_model(tmp_path / "synth.gguf")
    (tmp_path / "km_fake_default_model.py").write_text(f"def assemble():\n    return {str(gguf)!r}\n")
    spec = tmp_path / "default_model.json"
    spec.write_text(json.dumps({"package": "km-fake-default-model", "module": "km_fake_default_model",
                                "function": "assemble"}))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr("kernelmap.runtime.model.DEFAULT_MODEL_FILE", spec)
    assert main(["tokenize", "-p", "a b", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["model"] == str(gguf)


def test_audit_unreadable_source_outside_the_maps_fails_closed(tmp_path):
    reg, kdir, src = _project(tmp_path, [make_map("lin_a")])
    (kdir / "linear" / "broken.c").write_text("void km_x__ref(void) { this is not C }\n")
    found = audit(reg, kernel_root=kdir, project_root=tmp_path, src_root=src)["unowned_kernel_symbols"]
    assert [(f["file"], f["symbol"].startswith("(unreadable: ")) for f in found] == [("linear/broken.c", True)]
