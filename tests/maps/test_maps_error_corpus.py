"""Error corpus: every malformed map in tests/errors/maps fails with its class, pointer and message fragment."""

import json
from pathlib import Path

import pytest

import kernelmap.errors as errors
from kernelmap.cli import main
from kernelmap.maps import load_map

CORPUS = Path(__file__).resolve().parent.parent / "errors" / "maps"
CASES = json.loads((CORPUS / "cases.json").read_text())
FILES = sorted(p.name for p in CORPUS.glob("*.json") if p.name != "cases.json")


def test_corpus_every_file_has_a_case_and_every_case_a_file():
    assert sorted(CASES) == FILES
    assert len(FILES) >= 30


@pytest.mark.parametrize("name", FILES)
def test_corpus_map_fails_with_class_pointer_and_fragment(name):
    case = CASES[name]
    with pytest.raises(errors.KernelmapError) as exc:
        load_map(CORPUS / name)
    err = exc.value
    assert type(err).__name__ == case["error"], str(err)
    assert case["fragment"] in err.line(), err.line()
    assert err.pointer == case["pointer"], err.line()
    assert err.path == str(CORPUS / name)
    line = err.line()
    assert "\n" not in line and line.startswith(str(CORPUS / name)) and not line.endswith(".")


@pytest.mark.parametrize("name", ["unknown_phase.json", "truncated_json.json", "port_unbound.json",
                                  "constant_bound_div_zero.json", "scratch_negative.json",
                                  "binding_name_mismatch.json"])
def test_cli_validate_corpus_map_exits_1_with_one_line(name, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rc = main(["maps", "validate", str(CORPUS / name)])
    out, err = capsys.readouterr()
    assert rc == 1 and out == ""
    lines = err.strip().splitlines()
    assert lines[0].startswith("error: " + str(CORPUS / name))
    assert len(lines) <= 2 and all(line.startswith(("error:", "hint:")) for line in lines)
    assert "Traceback" not in err
    assert list(tmp_path.iterdir()) == []


def test_corpus_unknown_phase_hint_names_closest():
    with pytest.raises(errors.MapError) as exc:
        load_map(CORPUS / "unknown_phase.json")
    assert exc.value.hint == "closest: decode"
    assert exc.value.value == "decoding"
